#!/usr/bin/env python3
"""Joins the parts of one scripts/gpu-test run into one report, and says whether it is whole.

A device call may run for 600 s; every GPU test plus the validation of every task's sources
takes longer (about 1,000 s on the H200 in December 2026). scripts/gpu-test therefore runs in
parts: each call runs what the earlier parts did not (PTXBENCH_GPU_TEST_RESUME) and stops
starting sources at its budget (PTXBENCH_GPU_TEST_BUDGET_S). This tool, run where the parts
were copied (`scripts/gpu-test --merge OUT.json PART.json...`), writes one report in the shape
of a single part and decides:

  complete  every step ran in some part, every solution and decoy of every task under
            --tasks-dir was evaluated in some part, and the extras (two-kernel plan, local
            mode, repeated evaluations) ran;
  ok        complete, every part came from the same bundle commit, every step that ran passed
            (a step run in two parts must pass in both), and every evaluated source got the
            verdict its task.json expects.

What is missing is listed by name ("missing"), so a partial run can never pass as a whole one.
Exit code 0 only when ok.
"""
import argparse
import json
import os
import sys

# The steps of scripts/gpu-test, in its order (the report's keys).
TEST_STEPS = ("engine_gpu_cpu_test", "compile_jail_test", "gpu_runtime_test", "gpu_compare_test",
              "gpu_counters_test")
OTHER_STEPS = ("gpu_report", "evaluation_overhead", "torch_matmul")
EXTRAS = ("two_kernel_plan", "local_mode", "pipelined_pair", "stability")


def catalog_sources(tasks_dir):
    """Every (task, path) -> expect of every task.json under tasks_dir."""
    sources = {}
    for entry in sorted(os.listdir(tasks_dir)):
        path = os.path.join(tasks_dir, entry, "task.json")
        if entry.startswith("_") or not os.path.isfile(path):
            continue
        with open(path) as f:
            task = json.load(f)
        for ref in task.get("solutions", []) + task.get("decoys", []):
            sources[(task["id"], ref["path"])] = ref["expect"]
    return sources


def part_steps(part):
    """The steps a part ran (not skipped)."""
    steps = part.get("steps", "all")
    if steps == "all":
        ran = set(TEST_STEPS + OTHER_STEPS)
    else:
        ran = set(steps.split())
    for name in TEST_STEPS:
        if part.get(name, {}).get("skipped"):
            ran.discard(name)
    return ran


def steps_done(report):
    """The steps a part, or a merge of parts, already ran (the task validation is resumed by
    source, so it is never among them)."""
    if report.get("merged_from"):
        done = {s for s in TEST_STEPS if not report.get(s, {"skipped": True}).get("skipped")}
        done |= {s for s in ("evaluation_overhead", "torch_matmul") if s in report}
        return done
    done = part_steps(report) - {"gpu_report"}
    for step in ("evaluation_overhead", "torch_matmul"):
        value = report.get(step, {})
        if not isinstance(value, dict) or "error" in value or value.get("skipped"):
            done.discard(step)
    return done


def merge(parts, names, tasks_dir):
    merged = {"merged_from": [], "missing": [], "problems": []}
    commits = set()
    for name, part in zip(names, parts):
        commit = part.get("commit", "unknown")
        commits.add(commit)
        merged["merged_from"].append({
            "file": os.path.basename(name), "generated_at": part.get("generated_at"),
            "commit": commit, "steps": part.get("steps"), "ok": part.get("ok"),
            "total_seconds": part.get("total_seconds")})
    merged["commit"] = commits.pop() if len(commits) == 1 else None
    if merged["commit"] is None:
        merged["problems"].append("parts come from different bundle commits: " +
                                  ", ".join(sorted(p["commit"] for p in merged["merged_from"])))
    elif merged["commit"] == "unknown":
        merged["problems"].append("the parts do not say which bundle commit they ran")
    merged["environment"] = parts[0].get("environment", "")
    merged["total_seconds"] = sum(p.get("total_seconds") or 0 for p in parts)

    # Catch steps: the run of each step; a step run twice keeps both runs and must pass in both.
    for step in TEST_STEPS:
        runs = [(n, p[step]) for n, p in zip(names, parts)
                if step in part_steps(p) and step in p]
        if not runs:
            merged[step] = {"rc": 0, "skipped": True}
            merged["missing"].append("step " + step)
            continue
        merged[step] = dict(runs[-1][1], part=os.path.basename(runs[-1][0]))
        if len(runs) > 1:
            merged[step]["other_runs"] = [{"part": os.path.basename(n), "rc": r.get("rc")}
                                          for n, r in runs[:-1]]
        for n, r in runs:
            if r.get("rc") != 0:
                merged["problems"].append("%s failed in %s (rc %s)" %
                                          (step, os.path.basename(n), r.get("rc")))

    # Task validation: the union of the evaluated rows.
    options = set()
    rows = {}
    extras_part = None
    for name, part in zip(names, parts):
        if "gpu_report" not in part_steps(part):
            continue
        report = part.get("gpu_report", {})
        if not isinstance(report, dict) or "error" in report:
            merged["problems"].append("gpu_report of %s did not load: %s" %
                                      (os.path.basename(name), report.get("error")))
            continue
        options.add((report.get("counter_session"), report.get("gap_pad_max_us")))
        for row in report.get("validation", []):
            if row.get("skipped") or row.get("not_reached"):
                continue
            key = (row.get("task"), row.get("path"))
            if key in rows:
                merged["problems"].append("%s/%s evaluated in two parts" % key)
            rows[key] = dict(row, part=os.path.basename(name))
        if "stability" in report:
            extras_part = (name, report)
    if len(options) > 1:
        merged["problems"].append("parts ran under different timing-loop options: %s" %
                                  sorted(options, key=str))
    catalog = catalog_sources(tasks_dir)
    validation = []
    per_task = {}
    for key, expect in catalog.items():
        row = rows.get(key)
        task = per_task.setdefault(key[0], {"task": key[0], "sources": 0, "all_match": True,
                                            "validation": []})
        task["sources"] += 1
        if row is None:
            merged["missing"].append("source %s/%s" % key)
            task["all_match"] = False
            continue
        if row.get("expect") != expect:
            merged["problems"].append("%s/%s: the part expected %s, tasks/ now says %s" %
                                      (key + (row.get("expect"), expect)))
        if not row.get("match"):
            merged["problems"].append("%s/%s: expected %s, got %s" %
                                      (key + (expect, row.get("verdict", row.get("error")))))
            task["all_match"] = False
        validation.append(row)
        task["validation"].append(row)
    for key in rows:
        if key not in catalog:
            merged["problems"].append("%s/%s was evaluated but is not in %s" % (key + (tasks_dir,)))
    gpu_report = {"validation": validation, "tasks": list(per_task.values())}
    if options:
        gpu_report["counter_session"], gpu_report["gap_pad_max_us"] = sorted(options, key=str)[0]
    if extras_part is None:
        merged["missing"].append("extras (two-kernel plan, local mode, repeated evaluations)")
    else:
        name, report = extras_part
        for key in EXTRAS + ("task", "task_version_hash", "health"):
            if key in report:
                gpu_report[key] = report[key]
        gpu_report["extras_part"] = os.path.basename(name)
        if not report.get("all_expectations_met", False):
            merged["problems"].append("the extras' part did not meet every expectation")
    gpu_report["all_expectations_met"] = (
        all(r.get("match") for r in validation) and
        (extras_part is not None and extras_part[1].get("all_expectations_met", False)))
    merged["gpu_report"] = gpu_report

    # The bench and torch steps, and the counters' figures: from the part that ran each.
    for step, key in (("evaluation_overhead", "evaluation_overhead"),
                      ("torch_matmul", "torch_matmul"), ("gpu_counters_test", "counter_figures")):
        ran = [p for p in parts if step in part_steps(p) and isinstance(p.get(key), dict)
               and "error" not in p[key] and not p[key].get("skipped")]
        if not ran:
            if step != "gpu_counters_test":
                merged["missing"].append("step " + step)
            continue
        merged[key] = ran[-1][key]
        if step == "evaluation_overhead" and merged[key].get("all_pass") is not True:
            merged["problems"].append("evaluation_overhead: not every evaluation passed")
    merged["figures"] = {}
    for part in parts:
        merged["figures"].update(part.get("figures", {}))
    merged["complete"] = not merged["missing"]
    merged["ok"] = merged["complete"] and not merged["problems"]
    merged["steps"] = "all" if merged["complete"] else "partial"
    merged["partial"] = not merged["complete"]
    return merged


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--steps-left":
        # scripts/gpu-test's resume: the steps, in order, that the given report has not run.
        with open(sys.argv[2]) as f:
            done = steps_done(json.load(f))
        print(" ".join(s for s in TEST_STEPS + OTHER_STEPS if s not in done))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="merge_gpu_reports.py --steps-left REPORT prints the steps REPORT has not run.")
    parser.add_argument("out", help="the merged report to write")
    parser.add_argument("parts", nargs="+", help="the parts' gpu-test reports, in run order")
    parser.add_argument("--tasks-dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "tasks"))
    args = parser.parse_args()
    parts = []
    for name in args.parts:
        try:
            with open(name) as f:
                parts.append(json.load(f))
        except (OSError, json.JSONDecodeError) as exc:
            print("merge: %s: %s" % (name, exc), file=sys.stderr)
            return 2
    merged = merge(parts, args.parts, args.tasks_dir)
    with open(args.out, "w") as f:
        json.dump(merged, f, indent=1)
    print(json.dumps({"ok": merged["ok"], "complete": merged["complete"],
                      "parts": len(parts), "sources": len(merged["gpu_report"]["validation"]),
                      "missing": merged["missing"][:20], "problems": merged["problems"][:20]},
                     indent=1))
    return 0 if merged["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
