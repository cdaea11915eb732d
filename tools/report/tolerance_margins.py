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
"""

import argparse
import json
import os
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
                         ("wrong_no_delta", "recompute nothing"), ("fp16_", "other precision")):
        if name.startswith(prefix):
            return kind
    return "other decoy"


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


def table(report, tasks_dir):
    lines = []
    generated = report.get("generated_at", "?")
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
    lines.append("columns per output: largest absolute error, largest relative norm, smallest")
    lines.append("matched ratio (share of elements within all-close) over every trial; `tolerance`")
    lines.append("says whether the task's rules alone accept the kernel (`yes` for a decoy means the")
    lines.append("verdict had to come from another check). Skipped sources have no figures.")
    for entry in (report.get("gpu_report") or {}).get("tasks") or []:
        name = entry.get("task", "?")
        task_path = os.path.join(tasks_dir, name, "task.json")
        task = json.load(open(task_path)) if os.path.exists(task_path) else {}
        rules = "; ".join(rule_text(r) for r in rules_of(task)) or "?"
        # The fp64 rule only where the report's evaluator applied it (older reports predate it).
        fp64 = fp64_rule(task)
        if fp64 and has_fp64_figures(entry.get("validation") or []):
            rules += (f"; fp64 reference: {', '.join(fp64.get('outputs', []))} relative norm <= "
                      f"{fp64['max_relative_norm']:g} on the correctness workloads")
        lines.append("")
        lines.append(f"## {name}")
        lines.append("")
        lines.append(f"Rules: {rules}.")
        lines.append("")
        headroom = honest_headroom(task, entry.get("validation") or [])
        if headroom:
            lines.append(headroom)
            lines.append("")
        lines.append("| source | kind | expect | verdict | output: max abs / rel norm / matched | tolerance |")
        lines.append("|---|---|---|---|---|---|")
        for v in entry.get("validation") or []:
            path = v.get("path", "?")
            if v.get("skipped"):
                lines.append(f"| `{path}` | {kind_of(path)} | - | skipped | - | - |")
                continue
            figures = v.get("tolerance_figures") or {}
            cells = []
            accepted = None
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
                rule_results = f.get("rules") or {}
                passed = all(r.get("pass", False) for r in rule_results.values()
                             if r.get("checked", True))
                accepted = passed if accepted is None else accepted and passed
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
