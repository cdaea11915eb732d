#!/usr/bin/env python3
"""Prints the launch geometry a solution's PTXBENCH_PLAN gives for one workload, as the emulator
drivers take it on their command line, so the emulated launch is the plan's, not a copy of it.

usage: plan_launch.py SOURCE.cu NAME=VALUE...   (the workload's axes, e.g. B=1 H=2 S=384 D=64)
prints: grid_x grid_y block dynamic_shared_bytes, then dim0 dim1 box0 box1 of each tensor map
in plan order (the tensor is row-major and dense: the row stride is dim0 elements; a map whose
plan gives no dims, i.e. the tensor's own shape, prints -1 -1 and the driver fills that shape in).
Only single-launch plans with a 1-D block, no cluster and no scratch are accepted (what the
attention and GEMM solutions use); anything else is an error naming the field.
"""
import json
import re
import sys


def evaluate(expression, axes):
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/() ,]*", expression):
        sys.exit(f"plan_launch.py: unsupported expression '{expression}'")
    names = dict(axes)
    names["ceil_div"] = lambda a, b: -(-a // b)
    names["min"] = min
    names["max"] = max
    # Plan arithmetic is integer arithmetic (docs/submission-format.md, section 4).
    return int(eval(expression.replace("/", "//"), {"__builtins__": {}}, names))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    match = re.search(r"/\*\s*PTXBENCH_PLAN(.*?)\*/", text, re.S)
    if not match:
        sys.exit(f"plan_launch.py: no PTXBENCH_PLAN in {sys.argv[1]}")
    plan = json.loads(match.group(1))
    axes = {}
    for item in sys.argv[2:]:
        name, value = item.split("=")
        axes[name] = int(value)
    launches = plan["launches"]
    if len(launches) != 1:
        sys.exit("plan_launch.py: launches: exactly one launch supported")
    launch = launches[0]
    if launch.get("cluster"):
        sys.exit("plan_launch.py: launches[0].cluster: clusters are not emulated")
    if len(launch["block"]) != 1:
        sys.exit("plan_launch.py: launches[0].block: only 1-D blocks are emulated")
    if plan.get("scratch"):
        sys.exit("plan_launch.py: scratch: not supported by the emulator drivers")
    grid = [evaluate(g, axes) for g in launch["grid"]] + [1, 1]
    fields = [grid[0], grid[1], evaluate(launch["block"][0], axes),
              evaluate(launch["dynamic_shared_bytes"], axes)]
    for tensor_map in plan.get("tensor_maps", []):
        if (tensor_map.get("swizzle") != "128B" or len(tensor_map["box"]) != 2
                or len(tensor_map["dims"]) not in (0, 2) or tensor_map.get("element_strides")):
            sys.exit(f"plan_launch.py: tensor map {tensor_map['name']}: only dense 2-D 128B maps")
        fields += [evaluate(x, axes) for x in tensor_map["dims"]] or [-1, -1]
        fields += [evaluate(b, axes) for b in tensor_map["box"]]
    print(" ".join(str(f) for f in fields))


if __name__ == "__main__":
    main()
