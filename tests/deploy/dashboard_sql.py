#!/usr/bin/env python3
"""Prints, as JSON, every PostgreSQL query of the Grafana dashboards as Grafana's data source
would send it for the given variable values and time range: [{"dashboard", "panel", "title",
"sql"}, ...]. The substitution is deploy_support.substitute_grafana_sql, the one this folder's
tests use, so the C++ test that compares the dashboards with `ptxbench report`
(dashboard_figures_test.cc) runs exactly the SQL the monitoring test runs.

    dashboard_sql.py --source-dir DIR --variables '{"model": ["a"], ...}' --from T --to T

A variable left out gets every value its own query returns from --database-url's database
(Grafana's "All"); a multi-value variable's values are sent quoted and comma-separated.
"""

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_support as ds  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--variables", default="{}", help="JSON object: name -> list of values")
    parser.add_argument("--from", dest="time_from", required=True, help="RFC 3339 UTC")
    parser.add_argument("--to", dest="time_to", required=True, help="RFC 3339 UTC")
    args = parser.parse_args()
    chosen = json.loads(args.variables)
    parse = lambda text: datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    time_from, time_to = parse(args.time_from), parse(args.time_to)
    queries = []
    for name, dashboard in ds.load_dashboards(os.path.abspath(args.source_dir)).items():
        variables = {}
        for var in dashboard.get("templating", {}).get("list", []):
            if var.get("datasource", {}).get("uid") != ds.POSTGRES_UID:
                continue
            if var["name"] not in chosen:
                ds.fail(f"{name}: variable {var['name']} has no value in --variables")
            values = chosen[var["name"]]
            if var.get("multi") or var.get("includeAll"):
                variables[var["name"]] = ds.quote_sql_list(values)
            else:
                variables[var["name"]] = values[0]
        for panel in ds.panels(dashboard):
            for target in panel.get("targets", []):
                source = target.get("datasource") or panel.get("datasource") or {}
                if source.get("uid") != ds.POSTGRES_UID:
                    continue
                queries.append({
                    "dashboard": name,
                    "panel": panel.get("id"),
                    "title": panel.get("title", "?"),
                    "sql": ds.substitute_grafana_sql(target["rawSql"], variables, time_from,
                                                     time_to),
                })
    json.dump(queries, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
