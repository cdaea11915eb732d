#!/bin/sh
# Runs once, when the postgres container initialises its data folder: a read-only role for
# Grafana. The server creates its tables and views later (migrations at its start), so the
# grant is a default privilege on whatever the ptxbench role creates in schema public.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v password="$GRAFANA_DB_PASSWORD" <<'SQL'
CREATE ROLE grafana_reader LOGIN PASSWORD :'password';
GRANT CONNECT ON DATABASE ptxbench TO grafana_reader;
GRANT USAGE ON SCHEMA public TO grafana_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE ptxbench IN SCHEMA public
  GRANT SELECT ON TABLES TO grafana_reader;
SQL
