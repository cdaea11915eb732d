# Sourced by scripts/test and the benchmarks: starts a throw-away PostgreSQL 15 cluster on a
# free loopback port in a temporary folder and exports PTXBENCH_TEST_DATABASE_URL; stops and
# removes it on exit. initdb refuses to run as root, so as root the cluster belongs to the
# unprivileged 'postgres' user (created by the postgresql-15 package).
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}

# `test_postgres_start durable` keeps PostgreSQL's default durability (fsync, synchronous_commit
# and full_page_writes on), which is what the server's embedded cluster runs with
# (server/embedded_pg passes none of these): scripts/bench scheduler measures both.
test_postgres_start() {
  local dir port as=() durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [[ "${1:-}" == durable ]] && durability=""
  dir=$(mktemp -d /tmp/ptxbench-pg.XXXXXX)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
         || echo $((20000 + RANDOM % 20000)))
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$pg_bin/initdb" -D "$dir/data" -U ptxbench --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  "${as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -h 127.0.0.1 -k $dir $durability -c max_connections=300" \
    start >/dev/null || { cat "$dir/server.log" >&2; return 1; }
  TEST_PG_DIR=$dir
  export PTXBENCH_TEST_DATABASE_URL="postgresql://ptxbench@127.0.0.1:$port/postgres"
  trap test_postgres_stop EXIT
  echo "test-postgres: running on 127.0.0.1:$port ($dir)"
}

test_postgres_stop() {
  [[ -n "${TEST_PG_DIR:-}" ]] || return 0
  local as=()
  [[ $(id -u) -eq 0 ]] && as=(runuser -u postgres --)
  "${as[@]}" "$pg_bin/pg_ctl" -D "$TEST_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$TEST_PG_DIR"
  TEST_PG_DIR=
}
