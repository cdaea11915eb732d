#!/usr/bin/env python3
"""The measured tolerance-margin table of every task, from a scripts/gpu-test report.

Issue 11 ("Measured tolerance margins per task") asks, for each task, what the checker accepts
among null, reduced-work and lower-precision kernels, next to the honest solutions' and the
library's own error. The figures are the engine's own (each validation's `tolerance_figures`:
per output the largest absolute error, the largest relative norm and the smallest matched ratio
over every trial of every workload, and whether each of the task's rules passed), so the table
says what the verdicts were made of, not a re-analysis.

  tools/report/tolerance_margins.py REPORT.json [--tasks-dir tasks] > table.md
  tools/report/tolerance_margins.py REPORT.json --check docs/results/....md

--check regenerates the table and fails when the committed copy differs (CI keeps it true).
Rules: allclose (elements within atol + rtol*|ref| must be at least matched_ratio of them) and
relative_norm (||out - ref|| / ||ref|| <= bound), and where a task declares it and the report's
evaluator applied it, fp64_reference (the listed outputs against the engine's fp64 computation;
each cell then adds "(fp64 x, library y)": the kernel's and the library's figures). For a task with a relative-norm rule the table
says the honest solutions' worst relative norm per output and the headroom, bound / that worst
figure: how much less accurate than the reference solutions a kernel may be and still pass.
The `tolerance` column is whether every rule of the task passed on every output, i.e. whether
the tolerance alone would let the kernel through.

The library's own error against an fp64 reference comes from two places: the backward tasks'
validations carry it per output (the fp64 rule's figures), and for every task `gpu_runtime_test`
of the same report prints it (cuBLASLt's GEMMs, cuDNN's forward at each head dim, backward and
paged decode against the host or GPU fp64 reference); the table quotes those lines per task.
A summary at the top gives per task the rules, the honest solutions' worst figure, the library
against fp64, the margin decoy closest to passing among those the tolerance rejects, and the
decoys the tolerance alone accepts. A merged report (scripts/gpu-test --merge) has no
`generated_at` of its own: the title takes its parts' latest and names them.
"""

import argparse
import json
import os
import re
import sys


def rules_of(task):
    tolerance = task.get("tolerance")
    if tolerance is None:
        return []
    return tolerance if isinstance(tolerance, list) else [tolerance]


def rule_text(rule):
    if rule.get("rule") == "allclose":
        text = f"allclose atol {rule['atol']:g} rtol {rule['rtol']:g}"
        if rule.get("matched_ratio", 1.0) != 1.0:
            text += f" matched >= {rule['matched_ratio']:g}"
        return text
    if rule.get("rule") == "relative_norm":
        return f"relative norm <= {rule['max_relative_norm']:g}"
    return json.dumps(rule, sort_keys=True)


def fp64_rule(task):
    """The task's fp64 reference rule ({"outputs": [...], "max_relative_norm": x}) or None."""
    for rule in rules_of(task):
        if isinstance(rule.get("fp64_reference"), dict):
            return rule["fp64_reference"]
    return None


def has_fp64_figures(validations):
    return any(isinstance(f, dict) and f.get("max_fp64_relative_norm") is not None
               for v in validations for f in (v.get("tolerance_figures") or {}).values())


def kind_of(path):
    name = os.path.basename(path)
    if path.startswith("solutions/"):
        return "solution"
    for prefix, kind in (("null_", "null"), ("lse_constant", "null"), ("skip_", "reduced work"),
                         ("bf16_accumulation", "lower precision"), ("fp8_", "lower precision"),
                         ("p_fp8", "lower precision"), ("ds_fp8", "lower precision"),
                         ("dq_bf16_accumulation", "lower precision"),
                         ("per_tensor_scale", "lower precision"), ("no_promotion", "lower precision"),
                         ("wrong_no_delta", "recompute nothing"), ("fp16_", "other precision")):
        if name.startswith(prefix):
            return kind
    return "other decoy"


# gpu_runtime_test's lines with the library's error against an fp64 reference, per baseline
# operation (task.json's baseline.operation).
NUMBER = r"([-+0-9.eE]+)"
GEMM_FP64 = re.compile(r"cublaslt gemm against fp64, (M=\d+ N=\d+ K=\d+): max abs err " + NUMBER +
                       r", relative norm " + NUMBER)
FP8_FP64 = re.compile(r"cublaslt fp8 library error \(task layout\), (\w+): max abs " + NUMBER +
                      r", .*?relative norm " + NUMBER + r", outside all-close (\d+)")
FWD_FP64 = re.compile(r"cudnn sdpa forward D=(\d+) S=(\d+)( causal)? dist=\d+ seed=\d+: O allclose "
                      r"failures (\d+), O rel-norm " + NUMBER + r", LSE max abs err " + NUMBER)
BWD_FP64 = re.compile(r"cudnn sdpa backward S=(\d+)( causal)? dist=\d+ seed=\d+: rel-norm dQ " + NUMBER +
                      r" dK " + NUMBER + r" dV " + NUMBER)
PAGED_FP64 = re.compile(r"cudnn paged decode (B=\d+ HQ=\d+ HK=\d+ PPS=\d+) seed=\d+: O allclose "
                        r"failures (\d+), O rel-norm " + NUMBER + r", LSE max abs err " + NUMBER)


def span(values):
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else f"{fmt(low)}-{fmt(high)}"


def head_dim(task):
    for workload in task.get("workloads") or []:
        if "D" in (workload.get("axes") or {}):
            return workload["axes"]["D"]
    return None


def library_fp64(report, task):
    """The library's error against fp64 for this task's baseline, from gpu_runtime_test's lines
    (None where the report has none for it)."""
    warnings = (report.get("gpu_runtime_test") or {}).get("warnings") or []
    operation = (task.get("baseline") or {}).get("operation", "")
    if operation == "gemm_a_bt_bf16":
        hits = [m for w in warnings for m in [GEMM_FP64.search(w)] if m]
        if hits:
            return ("cuBLASLt against fp64 (`gpu_runtime_test`, " +
                    ", ".join(f"{m.group(1)}: relative norm {fmt(float(m.group(3)))}, max abs "
                              f"{fmt(float(m.group(2)))}" for m in hits) + ")")
    elif operation == "gemm_fp8_blockscaled_a_bt":
        hits = [m for w in warnings for m in [FP8_FP64.search(w)] if m]
        if hits:
            return ("cuBLASLt against fp64 (`gpu_runtime_test`, the task's scale layout, " +
                    ", ".join(m.group(1) for m in hits) + "): relative norm " +
                    span([float(m.group(3)) for m in hits]) + ", max abs " +
                    span([float(m.group(2)) for m in hits]) + ", elements outside all-close " +
                    ", ".join(m.group(4) for m in hits))
    elif operation.startswith("sdpa_fwd_bf16"):
        causal = operation.endswith("_causal")
        d = head_dim(task)
        hits = [m for w in warnings for m in [FWD_FP64.search(w)] if m and
                int(m.group(1)) == d and bool(m.group(3)) == causal]
        if hits:
            return (f"cuDNN against fp64 (`gpu_runtime_test`, D = {d}, S = " +
                    ", ".join(sorted({m.group(2) for m in hits}, key=int)) +
                    f", {len(hits)} draws): O relative norm " +
                    span([float(m.group(5)) for m in hits]) + ", LSE max abs " +
                    fmt(max(float(m.group(6)) for m in hits)) + ", O elements outside all-close " +
                    str(sum(int(m.group(4)) for m in hits)))
    elif operation.startswith("sdpa_bwd_bf16"):
        causal = operation.endswith("_causal")
        hits = [m for w in warnings for m in [BWD_FP64.search(w)] if m and bool(m.group(2)) == causal]
        if hits:
            return ("cuDNN against fp64 (`gpu_runtime_test`, S = " +
                    ", ".join(sorted({m.group(1) for m in hits}, key=int)) +
                    f", {len(hits)} draws): relative norm dQ " + span([float(m.group(3)) for m in hits]) +
                    ", dK " + span([float(m.group(4)) for m in hits]) + ", dV " +
                    span([float(m.group(5)) for m in hits]))
    elif operation == "sdpa_paged_decode_bf16":
        hits = [m for w in warnings for m in [PAGED_FP64.search(w)] if m]
        if hits:
            return ("cuDNN against fp64 (`gpu_runtime_test`, " +
                    ", ".join(sorted({m.group(1) for m in hits})) + f", {len(hits)} draws): O "
                    "relative norm " + span([float(m.group(3)) for m in hits]) + ", LSE max abs " +
                    fmt(max(float(m.group(4)) for m in hits)) + ", O elements outside all-close " +
                    str(sum(int(m.group(2)) for m in hits)))
    return None


def honest_headroom(task, validations):
    """The solutions' worst relative norm per output and bound / worst, for a relative-norm rule."""
    bounds = [r["max_relative_norm"] for r in rules_of(task) if r.get("rule") == "relative_norm"]
    worst = {}
    worst_block = {}
    for v in validations:
        if not v.get("path", "").startswith("solutions/") or v.get("skipped"):
            continue
        for output, f in (v.get("tolerance_figures") or {}).items():
            if isinstance(f, dict) and f.get("max_relative_norm") is not None:
                worst[output] = max(worst.get(output, 0.0), f["max_relative_norm"])
            if isinstance(f, dict) and f.get("max_block_relative_norm") is not None:
                worst_block[output] = max(worst_block.get(output, 0.0),
                                          f["max_block_relative_norm"])
    if not bounds or not worst:
        return None
    bound = min(bounds)
    top = max(worst.values())
    figures = ", ".join(f"{output} {fmt(worst[output])}" for output in sorted(worst))
    ratio = bound / top if top > 0 else None
    headroom = "unlimited (no error)" if ratio is None else (
        f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2g}x")
    text = (f"Honest solutions' worst relative norm: {figures}; headroom to the bound "
            f"{bound:g}: {headroom}.")
    block_bounds = [r["max_block_relative_norm"] for r in rules_of(task)
                    if r.get("rule") == "relative_norm" and r.get("max_block_relative_norm")]
    if block_bounds and worst_block:
        block_bound = min(block_bounds)
        block_top = max(worst_block.values())
        block_figures = ", ".join(f"{output} {fmt(worst_block[output])}"
                                  for output in sorted(worst_block))
        block_headroom = "unlimited (no error)" if block_top <= 0 else (
            f"{block_bound / block_top:.2g}x")
        text += (f" Worst {rules_of(task)[0].get('block_rows', '?')}-row block: {block_figures}; "
                 f"headroom to the block bound {block_bound:g}: {block_headroom}.")
    # The fp64 reference rule: the solutions' and the library's worst figure against fp64 on
    # the outputs the rule lists (reports of evaluators that apply it).
    fp64 = fp64_rule(task)
    if fp64 and has_fp64_figures(validations):
        honest, library = {}, {}
        for v in validations:
            if v.get("skipped"):
                continue
            for output, f in (v.get("tolerance_figures") or {}).items():
                if not isinstance(f, dict) or output not in fp64.get("outputs", []):
                    continue
                if v.get("path", "").startswith("solutions/") and \
                        f.get("max_fp64_relative_norm") is not None:
                    honest[output] = max(honest.get(output, 0.0), f["max_fp64_relative_norm"])
                if f.get("max_library_fp64_relative_norm") is not None:
                    library[output] = max(library.get(output, 0.0),
                                          f["max_library_fp64_relative_norm"])
        if honest:
            bound = fp64["max_relative_norm"]
            top = max(honest.values())
            text += (" Against the fp64 reference: solutions "
                     + ", ".join(f"{o} {fmt(honest[o])}" for o in sorted(honest))
                     + (f", library " + ", ".join(f"{o} {fmt(library[o])}" for o in sorted(library))
                        if library else "")
                     + f"; headroom to the fp64 bound {bound:g}: "
                     + ("unlimited (no error)" if top <= 0 else f"{bound / top:.2g}x") + ".")
    return text


def fmt(value, digits=3):
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}"


MARGIN_KINDS = ("null", "reduced work", "lower precision", "other precision", "recompute nothing")


def accepted_by_tolerance(v):
    """Whether every checked rule passed on every output (None: no figures)."""
    accepted = None
    for f in (v.get("tolerance_figures") or {}).values():
        if not isinstance(f, dict) or f.get("max_abs_error") is None:
            continue
        passed = all(r.get("pass", False) for r in (f.get("rules") or {}).values()
                     if r.get("checked", True))
        accepted = passed if accepted is None else accepted and passed
    return accepted


def worst_relative_norm(v):
    """(output, largest relative norm) over the outputs of one validation, or None."""
    figures = [(o, f["max_relative_norm"]) for o, f in (v.get("tolerance_figures") or {}).items()
               if isinstance(f, dict) and f.get("max_relative_norm") is not None]
    return max(figures, key=lambda x: x[1]) if figures else None


def honest_allclose(validations):
    """For a task without a relative-norm rule: the solutions' largest absolute error and
    smallest matched ratio per output."""
    worst_abs, least_matched = {}, {}
    for v in validations:
        if not v.get("path", "").startswith("solutions/") or v.get("skipped"):
            continue
        for output, f in (v.get("tolerance_figures") or {}).items():
            if isinstance(f, dict) and f.get("max_abs_error") is not None:
                worst_abs[output] = max(worst_abs.get(output, 0.0), f["max_abs_error"])
                least_matched[output] = min(least_matched.get(output, 1.0),
                                            f.get("min_matched_ratio", 1.0))
    if not worst_abs:
        return None
    return ("Honest solutions' largest absolute error: " +
            ", ".join(f"{o} {fmt(worst_abs[o])}" for o in sorted(worst_abs)) +
            "; smallest matched ratio: " +
            ", ".join(f"{o} {fmt(least_matched[o], 6)}" for o in sorted(least_matched)) + ".")


def summary_row(name, task, validations, library):
    """One line of the summary: rules, honest worst, library vs fp64, the rejected margin decoy
    closest to passing, and the margin decoys the tolerance alone accepts."""
    rules = "; ".join(rule_text(r) for r in rules_of(task)) or "?"
    fp64 = fp64_rule(task)
    if fp64 and has_fp64_figures(validations):
        rules += f"; fp64 {', '.join(fp64.get('outputs', []))} <= {fp64['max_relative_norm']:g}"
    honest = [worst_relative_norm(v) for v in validations
              if v.get("path", "").startswith("solutions/") and not v.get("skipped")]
    honest = [h for h in honest if h]
    honest_text = (f"{fmt(max(h[1] for h in honest))} ({max(honest, key=lambda h: h[1])[0]})"
                   if honest else "-")
    rejected, accepted = [], []
    for v in validations:
        path = v.get("path", "")
        if path.startswith("solutions/") or v.get("skipped") or kind_of(path) not in MARGIN_KINDS:
            continue
        verdict = accepted_by_tolerance(v)
        worst = worst_relative_norm(v)
        name_of = os.path.splitext(os.path.basename(path))[0]
        if verdict is False and worst:
            rejected.append((worst[1], f"`{name_of}` ({worst[0]} {fmt(worst[1])})"))
        elif verdict:
            accepted.append(f"`{name_of}` ({v.get('verdict', '-')})")
    tightest = min(rejected)[1] if rejected else "-"
    return (f"| {name} | {rules} | {honest_text} | {library or '-'} | {tightest} | "
            f"{', '.join(accepted) or 'none'} |")


def table(report, tasks_dir):
    lines = []
    parts = report.get("merged_from") or []
    # A merged report has no date of its own: its parts' latest.
    generated = report.get("generated_at") or max(
        (p.get("generated_at", "") for p in parts if isinstance(p, dict)), default="") or "?"
    environment = report.get("environment") or ""
    # The environment is nvidia-smi's text: its third line starts with the GPU's name.
    device = ""
    if isinstance(environment, str):
        for line in environment.splitlines():
            if line.startswith("NVIDIA "):
                device = line.split(",")[0]
                break
    lines.append(f"# Tolerance margins measured on the GPU ({generated} {device})".rstrip())
    lines.append("")
    lines.append("Generated by `tools/report/tolerance_margins.py` from the report beside this file;")
    if parts:
        lines.append("that report merges " + ", ".join(
            f"`{p.get('file', '?')}`" for p in parts if isinstance(p, dict)) +
            (f" (commit {report['commit'][:7]})" if report.get("commit") else "") + ";")
    lines.append("columns per output: largest absolute error, largest relative norm, smallest")
    lines.append("matched ratio (share of elements within all-close) over every trial; `tolerance`")
    lines.append("says whether the task's rules alone accept the kernel (`yes` for a decoy means the")
    lines.append("verdict had to come from another check). Skipped sources have no figures.")
    lines.append("Relative norms are against the library (cuBLASLt, cuDNN) unless marked fp64.")
    entries = []
    for entry in (report.get("gpu_report") or {}).get("tasks") or []:
        name = entry.get("task", "?")
        task_path = os.path.join(tasks_dir, name, "task.json")
        task = json.load(open(task_path)) if os.path.exists(task_path) else {}
        entries.append((name, task, entry.get("validation") or [], library_fp64(report, task)))
    if entries:
        lines.append("")
        lines.append("## Summary")
        lines.append("")
        lines.append("Per task: the honest solutions' worst relative norm (output), the library's "
                     "own error")
        lines.append("against fp64, the margin decoy (null, reduced work, lower or other "
                     "precision) that came")
        lines.append("closest to passing among those the rules reject (its worst output), and "
                     "the margin")
        lines.append("decoys the rules alone accept (with the verdict another check gave).")
        lines.append("")
        lines.append("| task | rules | honest worst | library vs fp64 | closest rejected margin decoy "
                     "| accepted by the rules alone |")
        lines.append("|---|---|---|---|---|---|")
        for name, task, validations, library in entries:
            lines.append(summary_row(name, task, validations, library))
    for name, task, validations, library in entries:
        rules = "; ".join(rule_text(r) for r in rules_of(task)) or "?"
        # The fp64 rule only where the report's evaluator applied it (older reports predate it).
        fp64 = fp64_rule(task)
        if fp64 and has_fp64_figures(validations):
            rules += (f"; fp64 reference: {', '.join(fp64.get('outputs', []))} relative norm <= "
                      f"{fp64['max_relative_norm']:g} on the correctness workloads")
        lines.append("")
        lines.append(f"## {name}")
        lines.append("")
        lines.append(f"Rules: {rules}.")
        lines.append("")
        headroom = honest_headroom(task, validations) or honest_allclose(validations)
        if headroom:
            lines.append(headroom)
            lines.append("")
        if library:
            lines.append(f"Library: {library}.")
            lines.append("")
        lines.append("| source | kind | expect | verdict | output: max abs / rel norm / matched | tolerance |")
        lines.append("|---|---|---|---|---|---|")
        for v in validations:
            path = v.get("path", "?")
            if v.get("skipped"):
                lines.append(f"| `{path}` | {kind_of(path)} | - | skipped | - | - |")
                continue
            figures = v.get("tolerance_figures") or {}
            cells = []
            for output in sorted(figures):
                f = figures[output]
                if not isinstance(f, dict) or f.get("max_abs_error") is None:
                    continue
                cell = (f"{output}: {fmt(f.get('max_abs_error'))} / "
                        f"{fmt(f.get('max_relative_norm'))} / {fmt(f.get('min_matched_ratio'), 6)}")
                # The block rule's worst 64-row block, in reports of evaluators that have it.
                if f.get("max_block_relative_norm") is not None:
                    cell += f" (block {fmt(f['max_block_relative_norm'])})"
                # Against the fp64 reference: the kernel's figure and the library's own.
                if f.get("max_fp64_relative_norm") is not None:
                    cell += f" (fp64 {fmt(f['max_fp64_relative_norm'])}"
                    if f.get("max_library_fp64_relative_norm") is not None:
                        cell += f", library {fmt(f['max_library_fp64_relative_norm'])}"
                    cell += ")"
                cells.append(cell)
            accepted = accepted_by_tolerance(v)
            verdict = v.get("verdict") or "-"
            if v.get("expect") and v.get("verdict") and v["expect"] != v["verdict"]:
                verdict += " (expected " + v["expect"] + ")"
            lines.append(f"| `{path}` ({v.get('arch', '?')}) | {kind_of(path)} | {v.get('expect', '-')} "
                         f"| {verdict} | {'<br>'.join(cells) or '-'} "
                         f"| {'-' if accepted is None else ('yes' if accepted else 'no')} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--tasks-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "tasks"))
    parser.add_argument("--check", metavar="COMMITTED_MD")
    args = parser.parse_args()
    try:
        report = json.load(open(args.report))
    except (OSError, ValueError) as error:
        print(f"tolerance_margins: cannot read the report {args.report}: {error}", file=sys.stderr)
        return 2
    text = table(report, args.tasks_dir)
    if args.check:
        committed = open(args.check).read()
        if committed != text:
            print(f"tolerance_margins: {args.check} is not what {args.report} gives; regenerate it "
                  f"with tools/report/tolerance_margins.py {args.report} > {args.check}",
                  file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
