#!/usr/bin/env python3
"""The figures of `scripts/bench interference`: the engine alone and beside start-up noise.

For each mode the GEMM reference solution was evaluated N times by bench/evaluation_overhead
while K processes of bench/startup_interference repeated one kind of start-up activity (a
pipelined next job's: CUDA context, cudaMalloc, library handle, module load; no kernel). This
writes one JSON object: per mode the noise (processes, iterations each), the engine's medians
over the warm evaluations (the first of each mode is left out: its reference process is cold),
each stage's and each timing part's ratio to the engine alone, and the speedup with its spread,
so that a slowed evaluation and a moved speedup are told apart.

  tools/report/interference_summary.py --work DIR --modes "none:0 ctx:3 ..." \\
      --device NAME --output interference.json
"""
import argparse
import datetime
import json
import os
import statistics
import sys

STAGES = ("compile", "correctness", "target_instructions", "timing")
TIMING_PARTS = ("setup", "warmup", "sampling", "counted", "gap_pad", "sketch")


def warm(values):
    """The evaluations after the first (cold reference process), or all when there is one."""
    return values[1:] if len(values) > 1 else values


def median_or_none(values):
    return statistics.median(values) if values else None


def summarize_mode(work, mode, processes):
    engine_path = os.path.join(work, f"engine-{mode}.json")
    figures = {"mode": mode, "processes": processes}
    noise = []
    for k in range(1, processes + 1):
        path = os.path.join(work, f"noise-{mode}-{k}.json")
        try:
            with open(path) as f:
                noise.append(json.loads(f.read().strip().splitlines()[-1]))
        except (OSError, ValueError, IndexError) as e:
            noise.append({"error": f"{path}: {e}"})
    figures["noise"] = noise
    try:
        with open(engine_path) as f:
            engine = json.load(f)
    except (OSError, ValueError) as e:
        figures["error"] = f"no engine figures: {e}"
        return figures
    runs = engine.get("runs", [])
    figures["evaluations"] = len(runs)
    figures["verdicts"] = [r.get("verdict") for r in runs]
    stage = {}
    for name in STAGES + ("wall",):
        values = [r["stages"].get(name, 0.0) if name != "wall" else r.get("wall_seconds", 0.0)
                  for r in runs]
        stage[name] = median_or_none(warm(values))
    figures["median_seconds"] = stage
    detail = engine.get("detail_seconds", {})
    figures["timing_median_seconds"] = {
        part: median_or_none(warm(detail.get(f"timing_{part}_seconds", {}).get("values", [])))
        for part in TIMING_PARTS
    }
    speedups = warm([r.get("speedup", 0.0) for r in runs])
    figures["speedup_median"] = median_or_none(speedups)
    figures["speedup_max_over_min"] = (max(speedups) / min(speedups)
                                       if speedups and min(speedups) > 0 else None)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--modes", required=True)
    parser.add_argument("--device", default="")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    modes = []
    for spec in args.modes.split():
        name, _, count = spec.partition(":")
        modes.append(summarize_mode(args.work, name, int(count or 0)))
    alone = next((m for m in modes if m["mode"] == "none" and "error" not in m), None)
    if alone is not None:
        for m in modes:
            if "error" in m or m is alone:
                continue
            m["ratio_to_alone"] = {
                key: (m["median_seconds"][key] / alone["median_seconds"][key]
                      if alone["median_seconds"].get(key) else None)
                for key in m["median_seconds"]
            }
            m["timing_ratio_to_alone"] = {
                key: (m["timing_median_seconds"][key] / alone["timing_median_seconds"][key]
                      if alone["timing_median_seconds"].get(key) else None)
                for key in m["timing_median_seconds"]
            }
            if alone.get("speedup_median") and m.get("speedup_median"):
                m["speedup_shift"] = m["speedup_median"] / alone["speedup_median"] - 1
    summary = {
        "benchmark": "interference",
        "date": datetime.date.today().isoformat(),
        "device": args.device,
        "setup": ("bench/evaluation_overhead on gemm_n7168_k5120 (reference solution, warm "
                  "reference process, baseline fastest) alone and beside bench/"
                  "startup_interference processes; medians over the evaluations after the "
                  "first"),
        "modes": modes,
    }
    with open(args.output, "w") as f:
        json.dump(summary, f, indent=1)
    for m in modes:
        if "error" in m:
            print(f"{m['mode']}: {m['error']}", file=sys.stderr)
            continue
        st = m["median_seconds"]
        tp = m["timing_median_seconds"]
        print(f"{m['mode']:>9} x{m['processes']}: wall {st['wall']:.3f} s, timing "
              f"{st['timing']:.3f} (sampling {tp['sampling'] or 0:.3f}, warm-up "
              f"{tp['warmup'] or 0:.3f}), correctness {st['correctness']:.3f}, speedup "
              f"{m['speedup_median']:.4f} (max/min {m['speedup_max_over_min'] or 0:.4f})",
              file=sys.stderr)


if __name__ == "__main__":
    main()
