#!/usr/bin/env python3
"""Checks that each derived GEMM source is still its original plus its committed patch.

Every task source is one whole submission, so most GEMM decoys are a copy of a solution or of
another decoy with a few lines changed: the cheat. A copy that drifts from what it was derived
from - a bug fixed in the solution but not in the copy, a constant retuned in one file only -
silently makes the decoy prove something other than its note says. Marked blocks
(check_copies.py) cannot hold these copies without changing the task sources, and a source's
bytes are its task's content hash and the key of the committed GPU verdicts. So the difference
is kept beside them instead: tools/task-sync/derived/<task>/<decoy>.diff is a unified diff from
the original's code to the decoy's, and this check (CI: tests/tools, task_derived_in_sync) fails
when the decoy's code is not the original's code with that patch applied, naming the decoy, its
original and the first line that differs.

The patch IS the decoy's cheat: review it as such. Its '-' and '+' lines should be exactly what
the decoy's header says it changes; anything else in it is drift that --write has frozen.

What is compared (as in check_copies.py and tools/attention-dev/check_variants.py):
- Code lines only: comment-only and blank lines are left out (they describe the file they are
  in), trailing white space is dropped, and the hunk line numbers count code lines.
- A block that check_copies.py checks (`// ---- <title> (shared, verbatim, by ...) ----` or
  `(<path>, verbatim)`) is read as its opening marker line alone: in the decoy always, in the
  original when the decoy carries the same title. Its content is check_copies.py's to compare.
- A hunk is found by its content nearest its line numbers (patch(1)'s offset), so a code line
  added to the original and the decoy alike still passes; --write refreshes the numbers.

A second rule keeps new copies from escaping: every source of a surveyed task (SURVEYED) whose
code is at least NEAR (difflib ratio) like another source of those tasks must be in a patch, as
decoy or original, or be named in NOT_DERIVED with the reason.

Use:
  check_derived.py                        check (CI)
  check_derived.py --write                rewrite every patch from the current sources, after an
                                          intentional change; read the new diff before committing
  check_derived.py --add DECOY ORIGINAL   start a patch (paths from the repository root)
  check_derived.py --survey               every surveyed source, its closest other, how it is held
  --root DIR                              a tree other than this repository (the self-test)
"""
import argparse
import difflib
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_copies  # noqa: E402  (same folder: one definition of code lines and markers)

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DERIVED = os.path.join("tools", "task-sync", "derived")

# Task folders whose sources are surveyed for near-copies. The attention and paged-decode tasks'
# derived sources are written by generators and checked by tools/attention-dev instead.
SURVEYED = "gemm_*"
NEAR = 0.6

# Sources (from tasks/) that resemble another at NEAR or more but are not derived from it: why.
NOT_DERIVED = {
    "gemm_n7168_k5120/solutions/sm90a_wgmma_tma_multicast.cu":
        "a second solution (cluster multicast of the B tile), not a copy of sm90a_wgmma_tma.cu "
        "with a change: each solution is proven by its own pass verdict, and they differ on purpose",
    "gemm_n7168_k5120/decoys/fp16_operands.cu":
        "its own kernel (fp16 conversion in shared memory, one-stage m64n128k16 wgmma); it shares "
        "only the skeleton of fp8_e4m3_qgmma.cu, whose data path is different throughout",
    "gemm_n7168_k5120/decoys/fp8_e4m3_qgmma.cu":
        "its own kernel (two bf16 boxes per operand converted to e4m3, m64n128k32 wgmma); see "
        "fp16_operands.cu",
}

DEFAULT_PREAMBLE = """\
# {decoy} = {original} + this change.
# Code lines only (tools/task-sync/check_derived.py). The change is the decoy's cheat: review it.
"""

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def checked_block_title(line):
    """The title of a block check_copies.py checks, if this line opens one."""
    if line.startswith("// ---- end of"):
        return None
    m = check_copies.START.match(line)
    if m and (check_copies.SHARED.match(m.group(2)) or check_copies.FROM_FILE.match(m.group(2))):
        return m.group(1)
    return None


def block_titles(path):
    return {t for t in map(checked_block_title, open(path, encoding="utf-8")) if t}


def view(path, collapse):
    """[(line number, text)] of a source's code lines; a checked block whose title is in
    collapse (True: every one) is its marker line alone."""
    out, skipping = [], False
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        if skipping:
            skipping = not check_copies.END.match(line)
            continue
        title = checked_block_title(line)
        if title is not None and (collapse is True or title in collapse):
            out.append((number, line.rstrip()))
            skipping = True
            continue
        out.extend((number, text) for text in check_copies.code([line]))
    return out


def views(task_dir, original, decoy):
    d = view(os.path.join(task_dir, decoy), True)
    o = view(os.path.join(task_dir, original), block_titles(os.path.join(task_dir, decoy)))
    return o, d


class Patch:
    def __init__(self, path):
        self.path = path
        self.preamble, self.original, self.decoy, self.hunks = [], None, None, []
        lines = open(path, encoding="utf-8").read().splitlines()
        i = 0
        while i < len(lines) and not lines[i].startswith("--- "):
            self.preamble.append(lines[i])
            i += 1
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ValueError("no '--- <original>' and '+++ <decoy>' lines")
        self.original, self.decoy = lines[i][4:].strip(), lines[i + 1][4:].strip()
        for number in range(i + 2, len(lines)):
            line = lines[number]
            m = HUNK.match(line)
            if m:
                self.hunks.append((int(m.group(1)), []))
            elif self.hunks and line[:1] in (" ", "-", "+"):
                self.hunks[-1][1].append((number + 1, line[0], line[1:]))
            else:
                raise ValueError(f"line {number + 1} is not part of a hunk: {line!r}")


def find_hunk(texts, old, want, cursor):
    """Index where the hunk's old lines stand in texts (at or after cursor), nearest want."""
    if not old:
        return max(cursor, min(want, len(texts)))
    n = len(old)
    spots = [p for p in range(cursor, len(texts) - n + 1) if texts[p:p + n] == old]
    return min(spots, key=lambda p: abs(p - want)) if spots else None


def apply(patch, rel_patch, original, rel_original):
    """Original + patch as [(text, where it comes from)], or (None, why it does not apply)."""
    texts = [text for _, text in original]
    out, cursor, offset = [], 0, 0
    for k, (start, body) in enumerate(patch.hunks, 1):
        old = [text for _, kind, text in body if kind != "+"]
        want = start - 1 + offset if old else start + offset
        at = find_hunk(texts, old, want, cursor)
        if at is None:
            p = max(cursor, min(want, len(texts) - 1))
            i = next((i for i, t in enumerate(old) if p + i >= len(texts) or texts[p + i] != t),
                     0)
            found = (f"{rel_original}:{original[p + i][0]} is `{texts[p + i].strip()}`"
                     if p + i < len(texts) else f"{rel_original} ends")
            return None, (f"hunk {k} (@@ -{start}) no longer applies: near its place {found}, "
                          f"the patch expects `{old[i].strip()}` ({rel_patch}:{body[0][0]})")
        offset = at - (start - 1) if old else at - start
        out.extend((text, f"{rel_original}:{number}") for number, text in original[cursor:at])
        p = at
        for number, kind, text in body:
            if kind == "+":
                out.append((text, f"{os.path.basename(patch.path)}:{number}"))
            elif kind == " ":
                out.append((texts[p], f"{rel_original}:{original[p][0]}"))
                p += 1
            else:
                p += 1
        cursor = p
    out.extend((text, f"{rel_original}:{number}") for number, text in original[cursor:])
    return out, None


def first_difference(expected, decoy):
    """Where the decoy's code first differs from original + patch, or None."""
    for i in range(max(len(expected), len(decoy))):
        if i >= len(decoy):
            return (f"the decoy ends where the patched original goes on with "
                    f"`{expected[i][0].strip()}` ({expected[i][1]})")
        if i >= len(expected):
            return (f"line {decoy[i][0]} `{decoy[i][1].strip()}` is past the end of the patched "
                    "original")
        if expected[i][0] != decoy[i][1]:
            return (f"line {decoy[i][0]} is `{decoy[i][1].strip()}` where the patched original "
                    f"has `{expected[i][0].strip()}` ({expected[i][1]})")
    return None


def patches(root):
    return sorted(glob.glob(os.path.join(root, DERIVED, "*", "*.diff")))


def check_patch(root, path, problems):
    """Appends what is wrong with one patch; returns (task, original, decoy) or None."""
    rel = os.path.relpath(path, root)
    task = os.path.basename(os.path.dirname(path))
    task_dir = os.path.join(root, "tasks", task)
    try:
        patch = Patch(path)
    except ValueError as e:
        problems.append(f"{rel}: {e}")
        return None
    if os.path.splitext(os.path.basename(patch.decoy))[0] != os.path.splitext(
            os.path.basename(path))[0]:
        problems.append(f"{rel}: names the decoy {patch.decoy}; a patch is named after its decoy")
        return None
    for name in (patch.original, patch.decoy):
        if not os.path.isfile(os.path.join(task_dir, name)):
            problems.append(f"{rel}: tasks/{task}/{name} does not exist")
            return None
    decoy_rel, original_rel = f"tasks/{task}/{patch.decoy}", f"tasks/{task}/{patch.original}"
    original, decoy = views(task_dir, patch.original, patch.decoy)
    expected, why = apply(patch, rel, original, original_rel)
    if why is None:
        why = first_difference(expected, decoy)
    if why is not None:
        problems.append(f"{decoy_rel} is not {original_rel} + {rel}: {why}")
    return task, patch.original, patch.decoy


def write_patch(root, task, original, decoy, preamble=None):
    """Writes the patch of decoy from original; True when the file changed."""
    task_dir = os.path.join(root, "tasks", task)
    o, d = views(task_dir, original, decoy)
    if preamble is None:
        preamble = DEFAULT_PREAMBLE.format(decoy=decoy, original=original).splitlines()
    diff = list(difflib.unified_diff([t for _, t in o], [t for _, t in d], original, decoy,
                                     n=3, lineterm=""))
    if not diff:
        diff = [f"--- {original}", f"+++ {decoy}"]
    text = "\n".join(preamble + diff) + "\n"
    path = os.path.join(root, DERIVED, task, os.path.splitext(os.path.basename(decoy))[0] + ".diff")
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    if old == text:
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return True


def similarity(views_a, views_b):
    """How alike source a is to b: a with its checked blocks collapsed, against b read in full
    and collapsed (so a copy of another file's marked block, unmarked, still counts)."""
    a = views_a[1]
    best = 0.0
    for b in views_b:
        m = difflib.SequenceMatcher(None, a, b, autojunk=False)
        if m.real_quick_ratio() > best and m.quick_ratio() > best:
            best = max(best, m.ratio())
    return best


def survey(root, held):
    """[(source, its closest other, ratio, how it is held)] over the surveyed tasks."""
    sources = sorted(os.path.relpath(p, os.path.join(root, "tasks")) for p in
                     glob.glob(os.path.join(root, "tasks", SURVEYED, "*", "*.cu")))
    texts = {}
    for s in sources:
        path = os.path.join(root, "tasks", s)
        texts[s] = ([t for _, t in view(path, set())], [t for _, t in view(path, True)])
    rows = []
    for s in sources:
        closest, ratio = None, 0.0
        for other in sources:
            if other != s:
                r = similarity(texts[s], texts[other])
                if r > ratio:
                    closest, ratio = other, r
        how = held.get(s) or (f"NOT_DERIVED: {NOT_DERIVED[s]}" if s in NOT_DERIVED else None)
        rows.append((s, closest, ratio, how))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=ROOT, help="the tree (tasks/, tools/task-sync/derived/)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite every patch")
    mode.add_argument("--add", nargs=2, metavar=("DECOY", "ORIGINAL"), help="start a patch")
    mode.add_argument("--survey", action="store_true", help="list every surveyed source")
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    if args.add:
        decoy, original = (os.path.relpath(os.path.abspath(p), os.path.join(root, "tasks"))
                           for p in args.add)
        task, task_b = decoy.split(os.sep)[0], original.split(os.sep)[0]
        if task != task_b or not all(os.path.isfile(os.path.join(root, "tasks", p))
                                     for p in (decoy, original)):
            parser.error("DECOY and ORIGINAL: two sources of one task, e.g. "
                         "tasks/<task>/decoys/x.cu tasks/<task>/solutions/y.cu")
        write_patch(root, task, original.split(os.sep, 1)[1], decoy.split(os.sep, 1)[1])
        print(f"check_derived: wrote {DERIVED}/{task}/"
              f"{os.path.splitext(os.path.basename(decoy))[0]}.diff; read it, then commit it")
        return 0

    if args.write:
        for path in patches(root):
            try:
                patch = Patch(path)
            except ValueError as e:
                print(f"check_derived: {os.path.relpath(path, root)}: {e}", file=sys.stderr)
                return 1
            task = os.path.basename(os.path.dirname(path))
            if write_patch(root, task, patch.original, patch.decoy, patch.preamble):
                print(f"check_derived: rewrote {os.path.relpath(path, root)}; read the new diff")
        return 0

    problems, held = [], {}
    for path in patches(root):
        got = check_patch(root, path, problems)
        if got:
            task, original, decoy = got
            held[f"{task}/{decoy}"] = f"derived from {original} ({os.path.relpath(path, root)})"
            held.setdefault(f"{task}/{original}", f"original of patches in {DERIVED}/{task}")

    rows = survey(root, held)
    if args.survey:
        for source, closest, ratio, how in rows:
            print(f"{ratio:.3f} {source}  ~ {closest}\n      {how or 'not held'}")
        return 0
    reported = set()
    for source, closest, ratio, how in rows:
        if ratio >= NEAR and how is None and (closest, source) not in reported:
            reported.add((source, closest))
            problems.append(
                f"tasks/{source} is {ratio:.0%} like tasks/{closest} and no patch holds it: if it "
                f"is derived, run check_derived.py --add tasks/{source} <its original> and review "
                "the patch; if not, name it in NOT_DERIVED with the reason")
    for source in NOT_DERIVED:
        if not os.path.isfile(os.path.join(root, "tasks", source)):
            problems.append(f"NOT_DERIVED names tasks/{source}, which does not exist")

    for p in problems:
        print("check_derived:", p, file=sys.stderr)
    if problems:
        return 1
    count = sum(1 for how in held.values() if how.startswith("derived"))
    print(f"check_derived: {count} derived sources equal their original + patch; "
          f"{len(rows)} sources surveyed, none an unheld near-copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
