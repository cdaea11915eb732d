#!/usr/bin/env python3
"""tools/report/merge_gpu_reports.py on synthetic parts of one scripts/gpu-test run.

A task directory with two tasks and three sources, and parts shaped like gpu-test's reports:
a whole run in two parts merges to complete and ok; a source no part evaluated, a step no part
ran, parts of two commits, a wrong verdict, a source evaluated twice and a failed step each
make it not ok and are named; --steps-left tells a resumed call what is left.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "report", "merge_gpu_reports.py")
CATCH = {"rc": 0, "successes": 3, "failures": 0, "cases": []}


def write_tasks(tasks_dir):
    tasks = {
        "gemm": {"solutions": [{"arch": "sm_90a", "path": "solutions/a.cu", "expect": "pass"}],
                 "decoys": [{"arch": "sm_90a", "path": "decoys/b.cu", "expect": "wrong_result"}]},
        "attn": {"solutions": [{"arch": "sm_90a", "path": "solutions/c.cu", "expect": "pass"}],
                 "decoys": []},
    }
    for task_id, body in tasks.items():
        os.makedirs(os.path.join(tasks_dir, task_id))
        with open(os.path.join(tasks_dir, task_id, "task.json"), "w") as f:
            json.dump(dict(body, id=task_id), f)
    os.makedirs(os.path.join(tasks_dir, "_shared"))  # Not a task: must be ignored.


def row(task, path, expect, verdict):
    return {"task": task, "path": path, "expect": expect, "verdict": verdict,
            "match": expect == verdict}


def part_one():
    """Every test step, and the GEMM task; the attention source not reached by the budget."""
    return {
        "generated_at": "2026-12-03T10:00:00Z", "commit": "abc", "steps": "all", "ok": True,
        "total_seconds": 530,
        "engine_gpu_cpu_test": CATCH, "compile_jail_test": CATCH, "gpu_runtime_test": CATCH,
        "gpu_compare_test": CATCH, "gpu_counters_test": CATCH,
        "counter_figures": {"configs": 7},
        "evaluation_overhead": {"error": "FileNotFoundError"},
        "torch_matmul": {"median_ms": 1.1},
        "figures": {"torch_matmul_ms": 1.1},
        "gpu_report": {
            "counter_session": "per_configuration_started_early", "gap_pad_max_us": 3000,
            "validation": [row("gemm", "solutions/a.cu", "pass", "pass"),
                           row("gemm", "decoys/b.cu", "wrong_result", "wrong_result"),
                           {"task": "attn", "path": "solutions/c.cu", "not_reached": True}],
            "all_expectations_met": True, "complete": False}}


def part_two():
    """What part one left: the attention source, the extras, the overhead bench."""
    skipped = {"rc": 0, "skipped": True}
    return {
        "generated_at": "2026-12-03T10:10:00Z", "commit": "abc", "resumed_from": "part1.json",
        "steps": "gpu_report evaluation_overhead", "ok": True, "total_seconds": 300,
        "engine_gpu_cpu_test": skipped, "compile_jail_test": skipped, "gpu_runtime_test": skipped,
        "gpu_compare_test": skipped, "gpu_counters_test": skipped,
        "evaluation_overhead": {"all_pass": True, "wall_seconds": {"median": 2.0}},
        "figures": {"evaluation_overhead": {"all_pass": True}},
        "gpu_report": {
            "counter_session": "per_configuration_started_early", "gap_pad_max_us": 3000,
            "validation": [{"task": "gemm", "path": "solutions/a.cu", "skipped": True,
                            "in_part": "part1.json"},
                           {"task": "gemm", "path": "decoys/b.cu", "skipped": True,
                            "in_part": "part1.json"},
                           row("attn", "solutions/c.cu", "pass", "pass")],
            "two_kernel_plan": {"match": True}, "local_mode": {"exit_code": 0},
            "stability": {"evaluations": 5}, "all_expectations_met": True, "complete": False}}


def run(tmp, tasks_dir, parts, name):
    paths = []
    for i, part in enumerate(parts):
        path = os.path.join(tmp, "%s-part%d.json" % (name, i + 1))
        with open(path, "w") as f:
            json.dump(part, f)
        paths.append(path)
    out = os.path.join(tmp, name + "-merged.json")
    proc = subprocess.run([sys.executable, TOOL, out] + paths + ["--tasks-dir", tasks_dir],
                          capture_output=True, text=True)
    with open(out) as f:
        return proc.returncode, json.load(f), paths


def expect(condition, what):
    if not condition:
        print("FAIL:", what)
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tasks_dir = os.path.join(tmp, "tasks")
        write_tasks(tasks_dir)

        rc, merged, paths = run(tmp, tasks_dir, [part_one(), part_two()], "whole")
        expect(rc == 0 and merged["ok"] and merged["complete"], "two parts make a whole run: %s"
               % json.dumps({k: merged[k] for k in ("missing", "problems")}))
        expect(len(merged["gpu_report"]["validation"]) == 3, "three sources in the merge")
        expect(merged["gpu_report"]["extras_part"].endswith("part2.json"), "extras from part 2")
        expect(merged["evaluation_overhead"]["all_pass"] is True, "the bench from part 2")
        expect(merged["gpu_runtime_test"]["part"].endswith("part1.json"), "tests from part 1")
        expect(merged["commit"] == "abc" and merged["steps"] == "all", "one commit, all steps")

        # --steps-left: what a call resumed from part one still runs, then from the merge.
        left = subprocess.run([sys.executable, TOOL, "--steps-left", paths[0]],
                              capture_output=True, text=True, check=True).stdout.split()
        expect(left == ["gpu_report", "evaluation_overhead"], "steps left after part 1: %s" % left)
        left = subprocess.run([sys.executable, TOOL, "--steps-left",
                               os.path.join(tmp, "whole-merged.json")],
                              capture_output=True, text=True, check=True).stdout.split()
        expect(left == ["gpu_report"], "steps left after the whole run: %s" % left)

        rc, merged, _ = run(tmp, tasks_dir, [part_one()], "first-only")
        expect(rc == 1 and not merged["complete"], "one part alone is not complete")
        expect("source attn/solutions/c.cu" in merged["missing"], "the missing source is named")
        expect(any(m.startswith("extras") for m in merged["missing"]), "missing extras named")
        expect("step evaluation_overhead" in merged["missing"], "missing bench named")

        other = part_two()
        other["commit"] = "def"
        rc, merged, _ = run(tmp, tasks_dir, [part_one(), other], "two-commits")
        expect(rc == 1 and merged["complete"] and not merged["ok"], "two commits are not ok")
        expect(any("different bundle commits" in p for p in merged["problems"]), "commits named")

        wrong = part_two()
        wrong["gpu_report"]["validation"][2] = row("attn", "solutions/c.cu", "pass", "wrong_result")
        rc, merged, _ = run(tmp, tasks_dir, [part_one(), wrong], "wrong-verdict")
        expect(rc == 1 and any("attn/solutions/c.cu: expected pass, got wrong_result" in p
                               for p in merged["problems"]), "a wrong verdict is named")
        expect(not merged["gpu_report"]["all_expectations_met"], "expectations not met")

        twice = part_two()
        twice["gpu_report"]["validation"][0] = row("gemm", "solutions/a.cu", "pass", "pass")
        rc, merged, _ = run(tmp, tasks_dir, [part_one(), twice], "twice")
        expect(rc == 1 and any("gemm/solutions/a.cu evaluated in two parts" in p
                               for p in merged["problems"]), "a source evaluated twice is named")

        failed = part_one()
        failed["gpu_counters_test"] = dict(CATCH, rc=1)
        rc, merged, _ = run(tmp, tasks_dir, [failed, part_two()], "failed-step")
        expect(rc == 1 and any(p.startswith("gpu_counters_test failed") for p in
                               merged["problems"]), "a failed step is named")

        no_tests = copy.deepcopy(part_two())
        rc, merged, _ = run(tmp, tasks_dir, [no_tests], "no-tests")
        expect("step gpu_runtime_test" in merged["missing"], "a step no part ran is named")
    print("ok")


if __name__ == "__main__":
    main()
