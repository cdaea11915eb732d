#!/usr/bin/env python3
"""tools/task-sync/check_derived.py on temporary copies of the GEMM task's derived sources.

Each copy holds the committed patches of gemm_n7168_k5120 and the sources they and NOT_DERIVED
name, as they are in this tree. As committed it passes. One code line of the reference solution
changed outside skip_k_1pct's patch fails, naming the decoy, its original and the line, and
--write then takes the difference into the patch, where a reviewer reads it; a line changed in a
decoy fails; a change under a hunk's context says the hunk no longer applies. A comment-only edit
and a code line added to an original and its decoys alike pass. A new near-copy that no patch
holds fails until --add gives it one.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SYNC = os.path.join(ROOT, "tools", "task-sync")
TOOL = os.path.join(SYNC, "check_derived.py")
TASK = "gemm_n7168_k5120"
SOLUTION = "solutions/sm90a_wgmma_tma.cu"

sys.path.insert(0, SYNC)
import check_derived  # noqa: E402


def fixture(tmp, name):
    """A tree with the task's patches and the sources they name; returns (root, task folder)."""
    root = os.path.join(tmp, name)
    derived = os.path.join(root, check_derived.DERIVED, TASK)
    shutil.copytree(os.path.join(ROOT, check_derived.DERIVED, TASK), derived)
    task_dir = os.path.join(root, "tasks", TASK)
    sources = {s.split("/", 1)[1] for s in check_derived.NOT_DERIVED if s.startswith(TASK + "/")}
    for diff in os.listdir(derived):
        patch = check_derived.Patch(os.path.join(derived, diff))
        sources.update((patch.original, patch.decoy))
    for source in sources:
        os.makedirs(os.path.dirname(os.path.join(task_dir, source)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, "tasks", TASK, source), os.path.join(task_dir, source))
    return root, task_dir


def run(root, *args):
    proc = subprocess.run([sys.executable, TOOL, "--root", root] + list(args),
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def edit(path, old, new):
    text = open(path, encoding="utf-8").read()
    if text.count(old) != 1:
        print(f"FAIL: expected `{old}` once in {path}")
        sys.exit(1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new))


def line_of(path, text):
    return next(i for i, l in enumerate(open(path, encoding="utf-8"), 1) if text in l)


def expect(condition, what, output=""):
    if not condition:
        print("FAIL:", what)
        print(output)
        sys.exit(1)


def main():
    group = "constexpr int kGroupM = 16;"
    with tempfile.TemporaryDirectory() as tmp:
        root, task = fixture(tmp, "as-committed")
        rc, out = run(root)
        expect(rc == 0 and "derived sources equal" in out, "the committed patches pass", out)

        # The original drifts outside the decoy's patch: the decoy is named, with its original
        # and the first line that differs, on both sides.
        root, task = fixture(tmp, "original-drifted")
        edit(os.path.join(task, SOLUTION), group, "constexpr int kGroupM = 8;")
        rc, out = run(root)
        decoy = os.path.join(task, "decoys", "skip_k_1pct.cu")
        expect(rc == 1, "a drifted original fails", out)
        expect(f"tasks/{TASK}/decoys/skip_k_1pct.cu is not tasks/{TASK}/{SOLUTION} + "
               f"tools/task-sync/derived/{TASK}/skip_k_1pct.diff" in out, "decoy and original "
               "named", out)
        expect(f"line {line_of(decoy, group)} is `{group}  // M tiles per raster group.` where "
               "the patched original has `constexpr int kGroupM = 8;" in out, "the line named", out)
        expect(f"({SOLUTION}:{line_of(os.path.join(task, SOLUTION), 'kGroupM = 8')})"
               in out.replace(f"tasks/{TASK}/", ""), "the original's line named", out)
        # Taken as intended: --write puts the difference into the patch, and the check passes.
        rc, out = run(root, "--write")
        expect(rc == 0 and "rewrote tools/task-sync/derived/" in out, "--write rewrites", out)
        diff = open(os.path.join(root, check_derived.DERIVED, TASK, "skip_k_1pct.diff")).read()
        expect("-constexpr int kGroupM = 8;" in diff and f"+{group}" in diff,
               "the drift is in the rewritten patch, for a reviewer to see", diff)
        rc, out = run(root)
        expect(rc == 0, "the rewritten patches pass", out)

        # A line of the decoy itself changes.
        root, task = fixture(tmp, "decoy-drifted")
        edit(os.path.join(task, "decoys", "skip_k_10pct.cu"), group, "constexpr int kGroupM = 4;")
        rc, out = run(root)
        expect(rc == 1 and f"decoys/skip_k_10pct.cu is not tasks/{TASK}/{SOLUTION}" in out
               and "is `constexpr int kGroupM = 4;" in out
               and "where the patched original has `constexpr int kGroupM = 16;" in out,
               "a drifted decoy fails", out)

        # A change under the context of a hunk: the hunk no longer applies.
        root, task = fixture(tmp, "context-changed")
        context = "const int warpgroup = sm90::warpgroup_index();"
        edit(os.path.join(task, SOLUTION), context, "const int warpgroup = 1;")
        rc, out = run(root)
        expect(rc == 1 and "skip_k_1pct.cu is not" in out and "no longer applies" in out
               and "is `const int warpgroup = 1;`" in out, "a hunk's context changed", out)

        # Comment-only and blank lines are not compared; a code line added to an original and
        # every decoy derived from it alike moves the hunks, which are found where they went.
        root, task = fixture(tmp, "edited-alike")
        edit(os.path.join(task, SOLUTION), group, "// A new comment.\n\n" + group)
        family = ["null_zeros", "null_constant", "null_copy_a", "null_row_mean_a"]
        for name in family:
            edit(os.path.join(task, "decoys", name + ".cu"), "}  // namespace",
                 "static_assert(sizeof(float) == 4, \"fp32\");\n}  // namespace")
        rc, out = run(root)
        expect(rc == 0, "a comment-only edit and an edit made alike pass", out)

        # A new copy that no patch holds fails, until --add gives it a patch.
        root, task = fixture(tmp, "new-copy")
        copy = os.path.join(task, "decoys", "hang_longer.cu")
        shutil.copy(os.path.join(task, "decoys", "hang.cu"), copy)
        edit(copy, "nanosleep.u32 1000;", "nanosleep.u32 2000;")
        rc, out = run(root)
        expect(rc == 1 and f"tasks/{TASK}/decoys/hang_longer.cu is" in out
               and "no patch holds it" in out, "an unheld near-copy fails", out)
        rc, out = run(root, "--add", copy, os.path.join(task, "decoys", "trap.cu"))
        expect(rc == 0, "--add", out)
        rc, out = run(root)
        expect(rc == 0, "the added patch holds the copy", out)
    print("ok")


if __name__ == "__main__":
    main()
