#!/usr/bin/env python3
"""tools/report/interference_summary.py on made-up engine figures with known answers.

Two modes: the engine alone and beside noise that doubles every warm stage and moves the speedup
by 2 %. The summary must leave out each mode's first (cold) evaluation, give the ratios 2.0 and
the shift -0.02, carry the noise processes' counts, and say which mode has no engine figures
instead of failing.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "report", "interference_summary.py")


def engine(scale, speedup):
    """Four evaluations: a cold first one (10 s everywhere), then three warm ones."""
    runs, detail = [], {}
    parts = {"setup": 0.5, "warmup": 0.4, "sampling": 0.6, "counted": 0.35, "gap_pad": 0.2,
             "sketch": 0.05}
    for i in range(4):
        cold = i == 0
        stages = {"compile": 0.5, "correctness": 10.0 if cold else 0.1 * scale,
                  "target_instructions": 0.1 * scale, "timing": 10.0 if cold else 2.0 * scale}
        runs.append({"verdict": "pass", "wall_seconds": sum(stages.values()),
                     "stages": stages, "speedup": 0.5 if cold else speedup})
        for part, seconds in parts.items():
            detail.setdefault(f"timing_{part}_seconds", {"values": []})["values"].append(
                10.0 if cold else seconds * scale)
    return {"runs": runs, "detail_seconds": detail}


def main():
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for mode, scale, speedup in (("none", 1.0, 0.96), ("ctx", 2.0, 0.96 * 0.98)):
            with open(os.path.join(work, f"engine-{mode}.json"), "w") as f:
                json.dump(engine(scale, speedup), f)
        for k in (1, 2):
            with open(os.path.join(work, f"noise-ctx-{k}.json"), "w") as f:
                f.write('{"mode": "ctx", "iterations": 7, "seconds": 20.0}\n')
        out = os.path.join(work, "out.json")
        run = subprocess.run([sys.executable, TOOL, "--work", work, "--modes",
                              "none:0 ctx:2 idle:1", "--device", "test", "--output", out],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"FAIL: the tool exited {run.returncode}: {run.stderr}")
            return 1
        modes = {m["mode"]: m for m in json.load(open(out))["modes"]}
        alone, ctx = modes["none"], modes["ctx"]

        def check(what, got, want):
            if abs(got - want) > 1e-9:
                failures.append(f"{what}: {got}, want {want}")

        check("alone timing median (cold first left out)", alone["median_seconds"]["timing"], 2.0)
        check("ctx timing ratio", ctx["ratio_to_alone"]["timing"], 2.0)
        check("ctx correctness ratio", ctx["ratio_to_alone"]["correctness"], 2.0)
        check("ctx sampling ratio", ctx["timing_ratio_to_alone"]["sampling"], 2.0)
        check("ctx speedup shift", ctx["speedup_shift"], -0.02)
        check("ctx speedup spread", ctx["speedup_max_over_min"], 1.0)
        if [n.get("iterations") for n in ctx["noise"]] != [7, 7]:
            failures.append(f"ctx noise: {ctx['noise']}")
        if "error" not in modes["idle"] or "no engine figures" not in modes["idle"]["error"]:
            failures.append(f"idle without figures: {modes['idle']}")
        if "no engine figures" not in run.stderr:
            failures.append("stderr does not name the mode without figures")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("interference_summary: ratios, shift, cold evaluation and missing mode as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
