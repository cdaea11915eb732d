#!/usr/bin/env python3
"""End to end: a real Prometheus scrapes a real ptxbench-server and compile-only workers while
they evaluate compile-only submissions; then every PromQL expression of the Grafana dashboards
and of deploy/prometheus/rules must evaluate and return data, no alert may be active on the
healthy stack, and every SQL query of the dashboards must run against the test database and
return rows.

The Prometheus configuration is deploy/prometheus/prometheus.yml itself with its addresses and
intervals replaced (1 s scrapes and rule evaluations instead of 15 s), and the rules are the
checked-in files, so what is tested is what is deployed.

Skipped (exit 77) only when the prometheus binary is missing; scripts/install-deps installs it.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import time
import urllib.parse
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_support as ds  # noqa: E402

TASK = "gemm_n7168_k5120"
# A hand-picked mix: two models, three turns of each trajectory, every knowledge level, both
# arches, and sources that compile and ones that do not, so every leaderboard group has rows.
SOURCES = {
    "ok90": "solutions/sm90a_wgmma_tma.cu",
    "ok100": "solutions/sm100a_tcgen05_tma.cu",
    "bad": "decoys/compile_error_syntax.cu",
}


class Prometheus:
    def __init__(self, binary, config_path, work_dir):
        self.port = ds.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = ds.Process(
            [binary, f"--config.file={config_path}", f"--storage.tsdb.path={work_dir}/tsdb",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            f"{work_dir}/prometheus.log")

        def ready():
            if not self.process.running():
                ds.fail(f"prometheus exited; its log:\n{self.process.log()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        ds.wait_for("prometheus /-/ready", ready, 60)

    def api(self, path, **params):
        url = f"{self.base}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400/422: a bad expression; the body says why.
            return json.load(e)

    def instant(self, expr):
        return self.api("query", query=expr)

    def has_data(self, expr):
        answer = self.instant(expr)
        return answer.get("status") == "success" and bool(answer["data"]["result"])


def prometheus_config(source_dir, server_metrics, workers_file):
    """deploy/prometheus/prometheus.yml with this stack's addresses and 1 s intervals."""
    with open(f"{source_dir}/deploy/prometheus/prometheus.yml") as f:
        config = yaml.safe_load(f)
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [f"{source_dir}/deploy/prometheus/{pattern}"
                            for pattern in config["rule_files"]]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    if set(jobs) != {"ptxbench-server", "ptxbench-worker"}:
        ds.fail(f"prometheus.yml scrape jobs are {sorted(jobs)}; this test knows "
                "ptxbench-server and ptxbench-worker")
    jobs["ptxbench-server"]["static_configs"] = [{"targets": [server_metrics]}]
    jobs["ptxbench-worker"]["file_sd_configs"] = [{"files": [workers_file],
                                                   "refresh_interval": "1s"}]
    return config


def check_promql(prometheus, dashboards, start):
    """Every Prometheus query of every dashboard, as Grafana sends it (a range query over the
    test's time), returns at least one sample."""
    checked = 0
    errors = []
    for name, dashboard in dashboards.items():
        variables = {}
        for var in dashboard.get("templating", {}).get("list", []):
            if var.get("datasource", {}).get("uid") == ds.PROMETHEUS_UID:
                if "allValue" not in var:
                    ds.fail(f"{name}: variable {var['name']} has no allValue")
                variables[var["name"]] = var["allValue"]
                # label_values(SELECTOR, LABEL): what Grafana asks /api/v1/label/LABEL/values.
                match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["definition"])
                if not match:
                    errors.append(f"{name}: variable {var['name']}: {var['definition']} is not "
                                  "label_values(selector, label)")
                    continue
                answer = prometheus.api(f"label/{match.group(2)}/values",
                                        **{"match[]": match.group(1), "start": f"{start:.3f}"})
                checked += 1
                if answer.get("status") != "success" or not answer["data"]:
                    errors.append(f"{name}: variable {var['name']} ({var['definition']}) has "
                                  f"no value: {answer}")
        for title, target in ds.targets(dashboard, ds.PROMETHEUS_UID):
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$__interval", "1s")
            for var, value in variables.items():
                expr = expr.replace(f"${var}", value)
            if "$" in expr.replace("$labels", ""):
                errors.append(f"{name} / {title}: unsubstituted variable in {expr}")
                continue
            answer = prometheus.api("query_range", query=expr, start=f"{start:.3f}",
                                    end=f"{time.time():.3f}", step="1")
            checked += 1
            if answer.get("status") != "success":
                errors.append(f"{name} / {title}: {expr}\n    error: {answer.get('error')}")
            elif not any(series["values"] for series in answer["data"]["result"]):
                errors.append(f"{name} / {title}: {expr}\n    returned no data")
    return checked, errors


def check_rules(prometheus, start):
    """Every rule was evaluated without error; every recording rule returns data; every alert
    expression evaluates; no alert is pending or firing on this healthy stack."""
    errors = []
    answer = prometheus.api("rules")
    rules = [rule for group in answer["data"]["groups"] for rule in group["rules"]]
    if not rules:
        return 0, ["Prometheus loaded no rule"]
    for rule in rules:
        label = rule.get("name")
        if rule.get("health") != "ok":
            errors.append(f"rule {label}: health {rule.get('health')}: {rule.get('lastError')}")
        if rule["type"] == "recording":
            result = prometheus.api("query_range", query=rule["name"], start=f"{start:.3f}",
                                    end=f"{time.time():.3f}", step="1")
            if not any(s["values"] for s in result.get("data", {}).get("result", [])):
                errors.append(f"recording rule {label} ({rule['query']}) recorded no data")
        else:
            result = prometheus.instant(rule["query"])
            if result.get("status") != "success":
                errors.append(f"alert {label}: {result.get('error')}")
            if rule.get("alerts"):
                errors.append(f"alert {label} is {rule['alerts'][0]['state']} on a healthy "
                              f"stack: {rule['alerts']}")
    return len(rules), errors


def check_sql(database, dashboards, start, end):
    """Every PostgreSQL query of every dashboard, with Grafana's macros and the variables'
    values (from running the variables' own queries), runs and returns rows. One exception:
    this CPU stack evaluates compile-only submissions only (no GPU worker), so a query of
    full-scope trajectories (`scope = 'full'`) may be empty here; dashboard_figures_test runs
    every leaderboard query over a run with full-scope verdicts and requires rows of each."""
    errors = []
    checked = 0
    full_scope = int(database.scalar(
        "SELECT count(*) FROM benchmark_trajectories WHERE scope = 'full'"))
    time_from = datetime.datetime.fromtimestamp(start - 3600, datetime.timezone.utc)
    time_to = datetime.datetime.fromtimestamp(end + 3600, datetime.timezone.utc)
    for name, dashboard in dashboards.items():
        variables = {}
        for var in dashboard.get("templating", {}).get("list", []):
            if var.get("datasource", {}).get("uid") != ds.POSTGRES_UID:
                continue
            try:
                values = [row[0] for row in database.rows(var["query"])]
            except RuntimeError as e:
                errors.append(f"{name}: variable {var['name']}: {e}")
                continue
            checked += 1
            if not values:
                errors.append(f"{name}: variable {var['name']} query returned no rows")
                continue
            # Multi-value and All: Grafana sends every value, quoted; a single value as is.
            if var.get("multi") or var.get("includeAll"):
                variables[var["name"]] = ds.quote_sql_list(values)
            else:
                variables[var["name"]] = values[0]
        for title, target in ds.targets(dashboard, ds.POSTGRES_UID):
            sql = ds.substitute_grafana_sql(target["rawSql"], variables, time_from, time_to)
            checked += 1
            try:
                rows = database.rows(sql)
            except RuntimeError as e:
                errors.append(f"{name} / {title}:\n{sql}\n    error: {e}")
                continue
            if not rows and not (full_scope == 0 and "scope = 'full'" in sql):
                errors.append(f"{name} / {title}:\n{sql}\n    returned no rows")
    return checked, errors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--bin-dir", required=True)
    args = parser.parse_args()
    source = os.path.abspath(args.source_dir)

    prometheus_bin = shutil.which("prometheus")
    if prometheus_bin is None:
        print("SKIP: the prometheus binary is not installed (Debian package 'prometheus'; "
              "scripts/install-deps installs it)")
        return ds.SKIP

    database = ds.Database("ptxbench_deploy")
    work = ds.make_work_dir("ptxbench-deploy-e2e-")
    stack = None
    prometheus = None
    try:
        start = time.time()
        stack = ds.Stack(source, args.bin_dir, work, database)
        workers_file = f"{work}/workers.json"
        with open(workers_file, "w") as f:
            json.dump([], f)
        config_path = f"{work}/prometheus.yml"
        with open(config_path, "w") as f:
            yaml.safe_dump(prometheus_config(source, stack.metrics_address, workers_file), f)
        ds.run(["promtool", "check", "config", config_path])
        prometheus = Prometheus(prometheus_bin, config_path, work)
        ds.wait_for("the server scraped", lambda: prometheus.has_data(
            'up{job="ptxbench-server"} == 1'), 30)

        # Work queued before any worker runs: the queue gauges and the queue recording rule
        # must see a non-empty queue (the server exports a queue series only while it has one).
        task_dir = f"{source}/tasks/{TASK}"
        plan = []
        for model in ("model-alpha", "model-beta"):
            for n, knowledge in enumerate(("none", "templates", "contract")):
                session = f"{model}-s{n}"
                plan.append(("sm_90a", "bad", model, session, 0, knowledge))
                plan.append(("sm_90a", "ok90", model, session, 1, knowledge))
                plan.append(("sm_100a", "ok100", model, session + "b", 0, knowledge))
        first, second = plan[:8], plan[8:]
        for arch, src, model, session, turn, knowledge in first:
            stack.submit(TASK, arch, f"{task_dir}/{SOURCES[src]}", model, session, turn,
                         knowledge)
        ds.wait_for("queued jobs in Prometheus", lambda: prometheus.has_data(
            "ptxbench:queue_depth:sum_by_arch_kind > 0"), 30)
        time.sleep(3)  # A few more scrapes and evaluations of the waiting queue.

        targets = []
        for i in range(2):
            _, port = stack.start_worker(f"deploy-worker-{i}")
            targets.append({"targets": [f"127.0.0.1:{port}"], "labels": {"arch": "compile_only"}})
        with open(workers_file + ".tmp", "w") as f:
            json.dump(targets, f)
        os.replace(workers_file + ".tmp", workers_file)
        ds.wait_for("both workers scraped", lambda: prometheus.has_data(
            'count(up{job="ptxbench-worker"} == 1) == 2'), 30)

        stack.wait_for_verdicts(len(first))
        # Submitted while the workers are scraped, so that rates and histograms see the work.
        for arch, src, model, session, turn, knowledge in second:
            stack.submit(TASK, arch, f"{task_dir}/{SOURCES[src]}", model, session, turn,
                         knowledge)
        # A client mistake, so that the RPC error panels have a series: no such submission.
        missing = stack.client("watch", "00000000-0000-4000-8000-000000000000", check=False)
        if missing.returncode == 0:
            ds.fail(f"watching a submission that does not exist succeeded:\n{missing.stdout}")
        stack.wait_for_verdicts(len(plan))
        ds.wait_for("the last verdict counted by Prometheus", lambda: prometheus.has_data(
            f"sum(ptxbench_verdicts_total) >= {len(plan)}"), 30)
        time.sleep(5)  # Rates over the finished work, and rule evaluations after them.

        counts = database.rows("SELECT verdict_class, count(*) FROM verdicts GROUP BY 1 "
                               "ORDER BY 1")
        print(f"verdicts: {counts}")
        dashboards = ds.load_dashboards(source)
        down = [t for t in prometheus.api("targets")["data"]["activeTargets"]
                if t["health"] != "up"]
        if down:
            ds.fail(f"targets not up: {down}")
        promql_count, errors = check_promql(prometheus, dashboards, start)
        rule_count, rule_errors = check_rules(prometheus, start)
        sql_count, sql_errors = check_sql(database, dashboards, start, time.time())
        errors += rule_errors + sql_errors
        print(f"checked {promql_count} dashboard PromQL queries, {rule_count} rules, "
              f"{sql_count} SQL queries and variables")
        if errors:
            ds.fail("\n".join(errors))
        worker_codes, server_code = stack.stop()
        if server_code != 0 or any(code != 0 for code in worker_codes):
            ds.fail(f"unclean stop: server {server_code}, workers {worker_codes}")
        return 0
    finally:
        if prometheus is not None:
            prometheus.process.stop()
        if stack is not None:
            stack.stop()
        database.drop()
        if os.environ.get("PTXBENCH_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    sys.exit(main())
