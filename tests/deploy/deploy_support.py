"""Shared pieces of the deploy tests: real processes, ports, PostgreSQL through psql, a running
ptxbench-server with compile-only workers, and the Grafana dashboards' queries.

The deploy tests are Python rather than Catch2: they drive programs that are not ours
(prometheus, promtool, slurmctld, systemd-analyze, psql) and read YAML and JSON files, which
the standard library and Debian's python3-yaml do directly.
"""

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

SKIP = 77  # ctest SKIP_RETURN_CODE of every deploy test.


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout, interval=0.25):
    """Polls predicate() until it returns a truthy value; fails the test naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Process:
    """A program with stdout and stderr in one log file; stopped by stop() or at exit."""

    def __init__(self, argv, log_path, env=None):
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True)

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def wait_for_line(self, pattern, timeout):
        """The first match of regex `pattern` in the log; fails if the program exits first."""
        regex = re.compile(pattern)

        def find():
            match = regex.search(self.log())
            if match:
                return match
            if not self.running():
                fail(f"{self.argv[0]} exited ({self.proc.returncode}) before printing "
                     f"/{pattern}/; its log:\n{self.log()[-3000:]}")
            return None

        return wait_for(f"/{pattern}/ in {self.log_path}", find, timeout)

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def run(argv, timeout=60, check=True, env=None):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        fail(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}")
    return result


class Database:
    """A fresh database on the server of PTXBENCH_TEST_DATABASE_URL (scripts/lib/test-postgres.sh
    starts one), dropped by drop()."""

    def __init__(self, prefix):
        admin = os.environ.get("PTXBENCH_TEST_DATABASE_URL", "")
        if not admin:
            fail("PTXBENCH_TEST_DATABASE_URL is not set: run through scripts/test, or "
                 "`source scripts/lib/test-postgres.sh; test_postgres_start` first")
        self.admin_url = admin
        self.name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        parts = urllib.parse.urlsplit(admin)
        self.url = urllib.parse.urlunsplit(parts._replace(path="/" + self.name))
        self.psql_admin(f'CREATE DATABASE "{self.name}"')

    def psql_admin(self, sql):
        run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", self.admin_url, "-c", sql])

    def rows(self, sql):
        """Runs one statement; its rows as lists of strings (NULL as ''), or raises
        RuntimeError with psql's message."""
        result = subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--csv", self.url, "-c", sql],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip())
        lines = list(csv.reader(result.stdout.splitlines()))
        return lines[1:]  # The first line is the header.

    def scalar(self, sql):
        rows = self.rows(sql)
        return rows[0][0] if rows else None

    def drop(self):
        try:
            self.psql_admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        except SystemExit:
            pass


class Stack:
    """ptxbench-server on a fresh database, compile-only workers and the ptxbench client, all
    real processes; workers can be started at any time (also before they are needed)."""

    def __init__(self, source_dir, bin_dir, work_dir, database, metrics=True):
        self.source_dir = source_dir
        self.bin_dir = bin_dir
        self.work_dir = work_dir
        self.database = database
        self.workers = []
        argv = [f"{bin_dir}/ptxbench-server", "serve", "--database-url", database.url,
                "--listen", "127.0.0.1:0",
                "--metrics-listen", "127.0.0.1:0" if metrics else "off",
                "--tasks-dir", f"{source_dir}/tasks",
                "--migrations-dir", f"{source_dir}/migrations"]
        self.server = Process(argv, f"{work_dir}/server.log")
        line = self.server.wait_for_line(r"ptxbench-server serving grpc=(\S+) metrics=(\S+)", 90)
        self.address = line.group(1)
        self.metrics_address = line.group(2)

    def start_worker(self, name, metrics=True):
        argv = [f"{self.bin_dir}/ptxbench-worker", "--compile-only", "--server", self.address,
                "--tasks-dir", f"{self.source_dir}/tasks", "--hostname", name]
        if metrics:
            argv += ["--metrics-listen", "127.0.0.1:0"]
        worker = Process(argv, f"{self.work_dir}/{name}.log")
        self.workers.append(worker)
        worker.wait_for_line("registered with", 60)
        port = None
        if metrics:
            port = int(worker.wait_for_line(r"metrics on port (\d+)", 30).group(1))
        return worker, port

    def client(self, *args, check=True, timeout=120):
        return run([f"{self.bin_dir}/ptxbench", args[0], "--server", self.address, *args[1:]],
                   timeout=timeout, check=check)

    def submit(self, task, arch, source, model, session, turn, knowledge):
        out = self.client("submit", "--task", task, "--arch", arch, "--compile-only",
                          "--model", model, "--session", session, "--turn", str(turn),
                          "--knowledge", knowledge, source).stdout.strip()
        if not re.fullmatch(r"[0-9a-f-]{36}", out):
            fail(f"ptxbench submit printed {out!r}, not a submission id")
        return out

    def wait_for_verdicts(self, count, timeout=120):
        wait_for(f"{count} verdicts in the database",
                 lambda: int(self.database.scalar("SELECT count(*) FROM verdicts")) >= count,
                 timeout, interval=0.5)

    def stop(self):
        codes = [w.stop() for w in self.workers]
        code = self.server.stop()
        return codes, code


def make_work_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


# ------------------------------------------------------------------ Grafana dashboards
PROMETHEUS_UID = "ptxbench-prometheus"
POSTGRES_UID = "ptxbench-postgres"


def load_dashboards(source_dir):
    folder = f"{source_dir}/deploy/grafana/dashboards"
    dashboards = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(f"{folder}/{name}") as f:
                dashboards[name] = json.load(f)
    if not dashboards:
        fail(f"no dashboard in {folder}")
    return dashboards


def panels(dashboard):
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        for inner in panel.get("panels", []):
            yield inner


def targets(dashboard, uid):
    """(panel title, target) of every query of the data source `uid`."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            source = target.get("datasource") or panel.get("datasource") or {}
            if source.get("uid") == uid:
                yield panel.get("title", "?"), target


def substitute_grafana_sql(sql, variables, time_from, time_to):
    """What Grafana's PostgreSQL data source sends for `sql`: template variables (multi-value and
    All variables as a quoted list, single values as they are) and the time macros this
    project's dashboards use. An unknown macro fails the test rather than reaching PostgreSQL."""
    frm = time_from.strftime("%Y-%m-%dT%H:%M:%SZ")
    to = time_to.strftime("%Y-%m-%dT%H:%M:%SZ")

    def seconds(interval):
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        match = re.fullmatch(r"(\d+)([smhd])", interval)
        if not match:
            fail(f"interval {interval!r} in a $__timeGroup macro")
        return int(match.group(1)) * units[match.group(2)]

    sql = re.sub(r"\$__timeFilter\(([^)]+)\)",
                 lambda m: f"{m.group(1).strip()} BETWEEN '{frm}' AND '{to}'", sql)
    sql = re.sub(r"\$__timeGroupAlias\(([^,]+),\s*'?([0-9a-z]+)'?\)",
                 lambda m: (f"floor(extract(epoch from {m.group(1).strip()})/"
                            f"{seconds(m.group(2))})*{seconds(m.group(2))} AS \"time\""), sql)
    sql = re.sub(r"\$__timeGroup\(([^,]+),\s*'?([0-9a-z]+)'?\)",
                 lambda m: (f"floor(extract(epoch from {m.group(1).strip()})/"
                            f"{seconds(m.group(2))})*{seconds(m.group(2))}"), sql)
    sql = sql.replace("$__timeFrom()", f"'{frm}'").replace("$__timeTo()", f"'{to}'")
    for name in sorted(variables, key=len, reverse=True):
        sql = sql.replace(f"${{{name}}}", variables[name]).replace(f"${name}", variables[name])
    leftover = re.search(r"\$\w+", sql)
    if leftover:
        fail(f"unknown Grafana macro or variable {leftover.group(0)} in:\n{sql}")
    return sql


def quote_sql_list(values):
    return ",".join("'" + v.replace("'", "''") + "'" for v in values)
