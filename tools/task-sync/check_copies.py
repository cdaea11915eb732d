#!/usr/bin/env python3
"""Checks the code that task sources and template headers repeat on purpose.

Every task source is one whole submission, so decoys repeat a shared GEMM body, and the Hopper
and Blackwell template headers each carry their own mbarrier, fence and TMA helpers (a
submission includes exactly one). Copies drift; a drifted copy makes a decoy prove something
other than its note says, or gives the two architectures different semantics for one helper.
This check (CI: tests/tools, task_copies_in_sync) keeps them honest:

1. Blocks marked `// ---- <title> (shared, verbatim, by ...) ----` ... `// ---- end of ...`
   have the same code in every file of the task that carries that title.
2. Blocks marked `// ---- <title> (<path>, verbatim) ----` are a contiguous run of the code
   lines of <path> (relative to the task folder).
3. A helper defined in both template headers has the same code in both, unless DIFFERENT_BY_DESIGN
   names it with the reason.
Comment-only lines and blank lines are ignored: they describe the file they are in.
A whole source that is another with a few lines changed (most GEMM decoys) is held by a patch
instead: check_derived.py.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.join(ROOT, "tasks", "_shared", "templates")

START = re.compile(r"^// ---- (.+?) \((.+)\) ----\s*$")
END = re.compile(r"^// ---- end of .* ----\s*$")
SHARED = re.compile(r"^shared, verbatim, by ")
FROM_FILE = re.compile(r"^(\S+), verbatim$")

# Helpers whose two definitions differ on purpose: name -> why.
DIFFERENT_BY_DESIGN = {}


def code(lines):
    return [l.rstrip() for l in lines if l.strip() and not l.lstrip().startswith("//")]


def marked_blocks(path):
    """(title, origin, code lines) for every marked block of a file."""
    blocks, current = [], None
    for line in open(path, encoding="utf-8"):
        if current is None:
            m = START.match(line)
            if m and not line.startswith("// ---- end of"):
                current = (m.group(1), m.group(2), [])
        elif END.match(line):
            blocks.append((current[0], current[1], code(current[2])))
            current = None
        else:
            current[2].append(line)
    if current is not None:
        blocks.append((current[0], current[1], None))  # Unterminated.
    return blocks


def contains_run(haystack, needle):
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def check_task_blocks(problems):
    for task in sorted(glob.glob(os.path.join(ROOT, "tasks", "*"))):
        if os.path.basename(task).startswith("_"):
            continue
        shared = {}  # title -> (first file, code)
        for path in sorted(glob.glob(os.path.join(task, "**", "*.cu"), recursive=True)):
            rel = os.path.relpath(path, ROOT)
            for title, origin, lines in marked_blocks(path):
                if lines is None:
                    problems.append(f"{rel}: block '{title}' has no '// ---- end of' line")
                    continue
                if SHARED.match(origin):
                    if title not in shared:
                        shared[title] = (rel, lines)
                    elif shared[title][1] != lines:
                        first, want = shared[title]
                        at = next((i for i, (a, b) in enumerate(zip(want, lines)) if a != b),
                                  min(len(want), len(lines)))
                        problems.append(f"{rel}: block '{title}' differs from {first} "
                                        f"(first at code line {at + 1} of the block)")
                    continue
                m = FROM_FILE.match(origin)
                if m:
                    source = os.path.join(task, m.group(1))
                    if not os.path.exists(source):
                        problems.append(f"{rel}: block '{title}' names {m.group(1)}, "
                                        "which does not exist")
                    elif not contains_run(code(open(source, encoding="utf-8")), lines):
                        problems.append(f"{rel}: block '{title}' is not a contiguous copy of "
                                        f"{m.group(1)}")


FUNCTION = re.compile(r"^(?:template <[^>]*>\s*)?__device__ __forceinline__ [^(]*?\b(\w+)\(")


def helpers(path):
    """Helper name -> code lines of its definition (signature to the closing brace)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out, i = {}, 0
    while i < len(lines):
        m = FUNCTION.match(lines[i])
        start = i
        if m is None and lines[i].startswith("template <") and i + 1 < len(lines):
            m = FUNCTION.match(lines[i + 1])
            i += 1 if m else 0
        if m is None:
            i += 1
            continue
        depth, body, seen_open = 0, [], False
        j = i
        while j < len(lines):
            body.append(lines[j])
            depth += lines[j].count("{") - lines[j].count("}")
            seen_open = seen_open or "{" in lines[j]
            if seen_open and depth <= 0:
                break
            j += 1
        out.setdefault(m.group(1), []).append(code(lines[start:i] + body))
        i = j + 1
    return out


def normalized(definitions):
    return [[re.sub(r"\s+", " ", l.strip()) for l in d] for d in definitions]


def check_templates(problems):
    hopper = helpers(os.path.join(TEMPLATES, "ptxbench_hopper.cuh"))
    blackwell = helpers(os.path.join(TEMPLATES, "ptxbench_blackwell.cuh"))
    common = sorted(set(hopper) & set(blackwell))
    if len(common) < 10:
        problems.append(f"templates: only {len(common)} helpers found in both headers; "
                        "the parser no longer reads them")
    for name in common:
        if name in DIFFERENT_BY_DESIGN:
            continue
        if normalized(hopper[name]) != normalized(blackwell[name]):
            problems.append(f"templates: {name} differs between ptxbench_hopper.cuh and "
                            "ptxbench_blackwell.cuh (make them equal, or list it in "
                            "DIFFERENT_BY_DESIGN with the reason)")
    for name in DIFFERENT_BY_DESIGN:
        if name not in common:
            problems.append(f"templates: DIFFERENT_BY_DESIGN names {name}, which is not in both")
    return common


def main():
    problems = []
    check_task_blocks(problems)
    common = check_templates(problems)
    for p in problems:
        print("check_copies:", p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_copies: task blocks and {len(common)} shared template helpers in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
