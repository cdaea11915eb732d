#!/usr/bin/env python3
"""Checks that the attention tasks' derived sources still equal what they are derived from.

Each task source is a whole submission (one file, no shared includes beyond the template
header), so the causal solutions and the decoys repeat their original's code on purpose: a
decoy must differ from the reference exactly in the lines its note names. What keeps those
copies honest is this check, run by CI (tests/tools, task_variants_in_sync):

- the decoys and the causal backward solution are what bwd_gen_variants.py and
  fwd_gen_decoys.py write (their --check mode), and the head-dim-64 and -256 forward solutions
  and decoys (both arches) are what fwd_gen_headdim.py writes;
- every hand-kept causal solution is its non-causal original with only the kCausal switch
  flipped (comment lines may differ: they describe the task).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# (original, causal copy, the switch in the original, the switch in the copy)
PAIRS = [
    ("tasks/mha_with_lse_d128/solutions/sm90a_fa_wgmma_tma.cu",
     "tasks/mha_with_lse_d128_causal/solutions/sm90a_fa_wgmma_tma.cu",
     "constexpr bool kCausal = false;", "constexpr bool kCausal = true;"),
    ("tasks/mha_with_lse_d128/solutions/sm90a_fa_pingpong.cu",
     "tasks/mha_with_lse_d128_causal/solutions/sm90a_fa_pingpong.cu",
     "constexpr bool kCausal = false;", "constexpr bool kCausal = true;"),
    ("tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu",
     "tasks/mha_with_lse_d128_causal/solutions/sm100a_tcgen05_fwd_causal.cu",
     "  kCausal = 0,", "  kCausal = 1,"),
    ("tasks/mha_bwd_d128/solutions/sm100a_tcgen05_bwd.cu",
     "tasks/mha_bwd_d128_causal/solutions/sm100a_tcgen05_bwd_causal.cu",
     "  kCausal = 0,", "  kCausal = 1,"),
]


def code_lines(text):
    return [line for line in text.splitlines() if not line.lstrip().startswith("//")]


def main():
    problems = []
    generators = ("bwd_gen_variants.py", "fwd_gen_decoys.py", "fwd_gen_headdim.py")
    for generator in generators:
        run = subprocess.run([sys.executable, os.path.join(HERE, generator), "--check"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f"{generator}: {(run.stderr or run.stdout).strip()}")
    for original, copy, switch, flipped in PAIRS:
        text = open(os.path.join(ROOT, original)).read()
        if text.count(switch) != 1:
            problems.append(f"{original}: expected the line '{switch.strip()}' once")
            continue
        expected = code_lines(text.replace(switch, flipped))
        actual = code_lines(open(os.path.join(ROOT, copy)).read())
        if expected != actual:
            first = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b),
                         min(len(expected), len(actual)))
            problems.append(f"{copy}: its code is not {original} with '{flipped.strip()}' "
                            f"(first difference at code line {first + 1})")
    for problem in problems:
        print("check_variants:", problem, file=sys.stderr)
    if not problems:
        print(f"check_variants: {len(generators)} generators and {len(PAIRS)} causal pairs in sync")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
