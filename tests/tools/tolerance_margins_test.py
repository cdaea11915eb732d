#!/usr/bin/env python3
"""tools/report/tolerance_margins.py on a GPU report of the backward task's margin decoys.

Builds a report like scripts/gpu-test writes (validation entries with tolerance_figures) and a
task directory with the task's tolerance, runs the tool as CI does, and checks what the table
says: each decoy's class, the honest solutions' worst relative norm and headroom, expected and
unexpected verdicts, skipped sources, and --check against a stale copy; then the library's error
against fp64 quoted from gpu_runtime_test's lines, the summary per task (the closest rejected
margin decoy, those the rules alone accept), an allclose-only task's honest line, and the title
of a merged report (no generated_at of its own).
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "report", "tolerance_margins.py")


def figures(dq, dk, dv, passed):
    rule = {"relative_norm": {"pass": passed, "checked": True}}
    return {name: {"max_abs_error": 0.25, "max_relative_norm": value, "min_matched_ratio": 0.99,
                   "rules": rule}
            for name, value in (("dQ", dq), ("dK", dk), ("dV", dv))}


def validation(path, expect, verdict, dq, dk, dv):
    return {"path": path, "arch": "sm_90a", "expect": expect, "verdict": verdict,
            "tolerance_figures": figures(dq, dk, dv, max(dq, dk, dv) <= 0.01)}


REPORT = {
    "generated_at": "2026-12-02T09:00:00Z",
    "environment": "Wed Dec  2\nGPU 0\nNVIDIA H200, 570.00, 143771 MiB\n",
    "gpu_report": {"tasks": [{"task": "mha_bwd_d128_causal", "validation": [
        validation("solutions/sm90a_wgmma_tma.cu", "pass", "pass", 0.0036, 0.0042, 9.3e-05),
        validation("decoys/null_zeros.cu", "wrong_result", "wrong_result", 1, 1, 1),
        validation("decoys/null_copy_inputs.cu", "wrong_result", "wrong_result", 7.7, 9.9, 5.7),
        validation("decoys/skip_keys_1pct.cu", "pass", "pass", 0.0055, 0.0059, 0.0042),
        validation("decoys/p_fp8.cu", "wrong_result", "wrong_result", 0.0036, 0.0042, 0.019),
        validation("decoys/ds_fp8.cu", "wrong_result", "wrong_result", 0.028, 0.026, 9.3e-05),
        # A verdict other than the expectation is printed with it.
        validation("decoys/dq_bf16_accumulation.cu", "pass", "wrong_result", 0.0107, 0.0042,
                   9.3e-05),
        validation("decoys/wrong_no_delta.cu", "wrong_result", "wrong_result", 0.84, 0.86, 0),
        {"path": "decoys/skip_keys_10pct.cu", "skipped": True},
    ]}]},
}
# Reports of evaluators with the block rule carry each output's worst 64-row block.
REPORT["gpu_report"]["tasks"][0]["validation"][0]["tolerance_figures"]["dK"][
    "max_block_relative_norm"] = 0.0062
REPORT["gpu_report"]["tasks"][0]["validation"][3]["tolerance_figures"]["dK"][
    "max_block_relative_norm"] = 0.35

# Reports of evaluators with the fp64 reference rule carry each output's figure against fp64 and
# the library's own (dQ listed by the rule).
for index, (honest, library) in ((0, (0.0028, 0.0024)), (6, (0.0105, 0.0024))):
    for output, f in REPORT["gpu_report"]["tasks"][0]["validation"][index][
            "tolerance_figures"].items():
        f["max_fp64_relative_norm"] = honest if output == "dQ" else 0.003
        f["max_library_fp64_relative_norm"] = library if output == "dQ" else 0.0022
REPORT["gpu_report"]["tasks"][0]["validation"][6]["tolerance_figures"]["dQ"]["rules"] = {
    "relative_norm": {"pass": True, "checked": True},
    "fp64_reference": {"pass": False, "checked": True}}


# gpu_runtime_test's lines with the library's error against fp64 (two causal backward draws, one
# without the mask that the causal task must not quote, and the bf16 GEMM's).
REPORT["gpu_runtime_test"] = {"warnings": [
    "cudnn sdpa backward S=128 causal dist=0 seed=7: rel-norm dQ 0.00236567 dK 0.00234112 dV 0.0023922; {}",
    "cudnn sdpa backward S=384 causal dist=1 seed=11: rel-norm dQ 0.00231317 dK 0.00240076 dV "
    "0.00239894; {}",
    "cudnn sdpa backward S=128 dist=0 seed=7: rel-norm dQ 0.0099 dK 0.0099 dV 0.0099; {}",
    "cublaslt gemm against fp64, M=128 N=256 K=5120: max abs err 0.712455, relative norm 0.00166497, "
    "allclose(1e-2, 1e-2) failures 0 of 32768"]}

# An allclose-only task (the bf16 GEMM): honest figures as a line, a margin decoy the rules accept.
GEMM = {"task": "gemm_n7168_k5120", "validation": [
    {"path": "solutions/sm90a_wgmma_tma.cu", "arch": "sm_90a", "expect": "pass", "verdict": "pass",
     "tolerance_figures": {"C": {"max_abs_error": 0.0, "max_relative_norm": 0.0,
                                 "min_matched_ratio": 1.0,
                                 "rules": {"all_close": {"pass": True, "checked": True}}}}},
    {"path": "decoys/fp16_operands.cu", "arch": "sm_90a", "expect": "target_work_insufficient",
     "verdict": "target_work_insufficient",
     "tolerance_figures": {"C": {"max_abs_error": 0.25, "max_relative_norm": 2.1e-06,
                                 "min_matched_ratio": 1.0,
                                 "rules": {"all_close": {"pass": True, "checked": True}}}}},
    {"path": "decoys/bf16_accumulation.cu", "arch": "sm_90a", "expect": "wrong_result",
     "verdict": "wrong_result",
     "tolerance_figures": {"C": {"max_abs_error": 0.5, "max_relative_norm": 0.00297,
                                 "min_matched_ratio": 0.92688,
                                 "rules": {"all_close": {"pass": False, "checked": True}}}}}]}
REPORT["gpu_report"]["tasks"].append(GEMM)


def library_and_summary_checks(table, problems):
    """The library line, the summary rows and the allclose-only task's honest line."""
    library = ("Library: cuDNN against fp64 (`gpu_runtime_test`, S = 128, 384, 2 draws): relative "
               "norm dQ 0.00231-0.00237, dK 0.00234-0.0024, dV 0.00239-0.0024.")
    if library not in table:
        problems.append(f"no library line '{library}' in:\n{table}")
    if "Library: cuBLASLt against fp64 (`gpu_runtime_test`, M=128 N=256 K=5120: relative norm " \
            "0.00166, max abs 0.712)." not in table:
        problems.append(f"no GEMM library line in:\n{table}")
    summary = {line.split(" | ")[0][2:]: line for line in table.splitlines()
               if line.startswith("| ") and not line.startswith("| `") and " | " in line}
    bwd = summary.get("mha_bwd_d128_causal", "")
    # The closest rejected margin decoy: ds_fp8's worst output (0.028) is below null_copy_inputs'
    # and skip_keys_10pct is skipped; dq_bf16_accumulation (0.0107) failed only the fp64 rule.
    if "| `dq_bf16_accumulation` (dQ 0.0107) |" not in bwd:
        problems.append(f"summary row of the backward task: {bwd}")
    if not bwd.endswith("| `skip_keys_1pct` (pass) |"):
        problems.append(f"the backward summary must list skip_keys_1pct as accepted: {bwd}")
    if "| 0.0042 (dK) |" not in bwd or "fp64 dQ <= 0.006" not in bwd:
        problems.append(f"the backward summary's honest worst or rules: {bwd}")
    gemm = summary.get("gemm_n7168_k5120", "")
    if "| `bf16_accumulation` (C 0.00297) | `fp16_operands` (target_work_insufficient) |" not in gemm:
        problems.append(f"summary row of the GEMM: {gemm}")
    if "Honest solutions' largest absolute error: C 0; smallest matched ratio: C 1." not in table:
        problems.append(f"no honest all-close line for the GEMM in:\n{table}")


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "tasks", "mha_bwd_d128_causal"))
        os.makedirs(os.path.join(tmp, "tasks", "gemm_n7168_k5120"))
        with open(os.path.join(tmp, "tasks", "gemm_n7168_k5120", "task.json"), "w") as out:
            json.dump({"tolerance": {"rule": "allclose", "atol": 0.01, "rtol": 0.01},
                       "baseline": {"library": "cublaslt", "operation": "gemm_a_bt_bf16"}}, out)
        with open(os.path.join(tmp, "tasks", "mha_bwd_d128_causal", "task.json"), "w") as out:
            json.dump({"tolerance": {"rule": "relative_norm", "max_relative_norm": 0.01,
                                     "block_rows": 64, "max_block_relative_norm": 0.05,
                                     "fp64_reference": {"outputs": ["dQ"],
                                                        "max_relative_norm": 0.006}},
                       "baseline": {"library": "cudnn", "operation": "sdpa_bwd_bf16_causal"}}, out)
        report = os.path.join(tmp, "report.json")
        with open(report, "w") as out:
            json.dump(REPORT, out)
        run = subprocess.run([sys.executable, TOOL, report, "--tasks-dir",
                              os.path.join(tmp, "tasks")], capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            return 1
        table = run.stdout
        rows = {line.split("`")[1]: line for line in table.splitlines() if line.startswith("| `")}
        expectations = [
            ("decoys/null_zeros.cu", "| null | wrong_result | wrong_result |"),
            ("decoys/null_copy_inputs.cu", "| null |"),
            ("decoys/skip_keys_1pct.cu", "| reduced work | pass | pass |"),
            ("decoys/p_fp8.cu", "| lower precision |"),
            ("decoys/ds_fp8.cu", "| lower precision |"),
            ("decoys/dq_bf16_accumulation.cu",
             "| lower precision | pass | wrong_result (expected pass) |"),
            ("decoys/wrong_no_delta.cu", "| recompute nothing |"),
            ("decoys/skip_keys_10pct.cu", "| reduced work | - | skipped | - | - |"),
            ("solutions/sm90a_wgmma_tma.cu", "| solution | pass | pass |"),
        ]
        for path, fragment in expectations:
            if fragment not in rows.get(path, ""):
                problems.append(f"row of {path} lacks '{fragment}': {rows.get(path)}")
        if not rows.get("decoys/skip_keys_1pct.cu", "").endswith("| yes |"):
            problems.append("skip_keys_1pct passed every rule: its tolerance column must be yes")
        if not rows.get("decoys/ds_fp8.cu", "").endswith("| no |"):
            problems.append("ds_fp8 failed the rule: its tolerance column must be no")
        headroom = ("Honest solutions' worst relative norm: dK 0.0042, dQ 0.0036, dV 9.3e-05; "
                    "headroom to the bound 0.01: 2.4x.")
        if headroom not in table:
            problems.append(f"no headroom line '{headroom}' in:\n{table}")
        block_headroom = ("Worst 64-row block: dK 0.0062; headroom to the block bound 0.05: "
                          "8.1x.")
        if block_headroom not in table:
            problems.append(f"no block headroom '{block_headroom}' in:\n{table}")
        if "dK: 0.25 / 0.0059 / 0.99 (block 0.35)" not in rows.get("decoys/skip_keys_1pct.cu",
                                                                           ""):
            problems.append(f"skip_keys_1pct row lacks its block figure: {rows.get('decoys/skip_keys_1pct.cu')}")
        if "(2026-12-02T09:00:00Z NVIDIA H200)" not in table.splitlines()[0]:
            problems.append(f"title lacks the date and device: {table.splitlines()[0]}")
        fp64_headroom = ("Against the fp64 reference: solutions dQ 0.0028, library dQ 0.0024; "
                         "headroom to the fp64 bound 0.006: 2.1x.")
        if fp64_headroom not in table:
            problems.append(f"no fp64 headroom '{fp64_headroom}' in:\n{table}")
        if "fp64 reference: dQ relative norm <= 0.006 on the correctness workloads" not in table:
            problems.append(f"the rules line lacks the fp64 rule:\n{table}")
        dq_row = rows.get("decoys/dq_bf16_accumulation.cu", "")
        if "dQ: 0.25 / 0.0107 / 0.99 (fp64 0.0105, library 0.0024)" not in dq_row:
            problems.append(f"dq_bf16_accumulation row lacks its fp64 figures: {dq_row}")
        if not dq_row.endswith("| no |"):
            problems.append("dq_bf16_accumulation failed the fp64 rule: tolerance must be no")
        library_and_summary_checks(table, problems)
        # A merged report: no generated_at of its own; the title takes its parts' latest.
        merged = dict(REPORT)
        del merged["generated_at"]
        merged["commit"] = "8c85da4c3e8b7a62a01e0b4f66aa5b762de6a781"
        merged["merged_from"] = [{"file": "run-a.json", "generated_at": "2026-12-03T18:37:00Z"},
                                 {"file": "run-b.json", "generated_at": "2026-12-03T18:42:02Z"}]
        merged_path = os.path.join(tmp, "merged.json")
        with open(merged_path, "w") as out:
            json.dump(merged, out)
        run = subprocess.run([sys.executable, TOOL, merged_path, "--tasks-dir",
                              os.path.join(tmp, "tasks")], capture_output=True, text=True)
        merged_lines = run.stdout.splitlines()
        if run.returncode != 0 or not merged_lines or \
                "(2026-12-03T18:42:02Z NVIDIA H200)" not in merged_lines[0] or \
                "that report merges `run-a.json`, `run-b.json` (commit 8c85da4);" not in run.stdout:
            problems.append(f"merged report: rc {run.returncode}, {run.stderr}\n{run.stdout[:600]}")
        stale = os.path.join(tmp, "stale.md")
        with open(stale, "w") as out:
            out.write(table.replace("2.4x", "2.9x"))
        check = subprocess.run([sys.executable, TOOL, report, "--tasks-dir",
                                os.path.join(tmp, "tasks"), "--check", stale],
                               capture_output=True, text=True)
        if check.returncode != 1 or "regenerate it" not in check.stderr:
            problems.append(f"--check on a stale table: rc {check.returncode}, {check.stderr!r}")
    for problem in problems:
        print("tolerance_margins_test:", problem, file=sys.stderr)
    print(f"tolerance_margins_test: {len(expectations) + 18 - len(problems)} passed, "
          f"{len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
