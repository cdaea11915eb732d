#!/usr/bin/python3
"""CPU simulation of the attention-backward tolerance-margin decoys (issue 11).

For one head of each correctness workload's S (spiky inputs, as the task draws them), computes
the exact gradient in fp64 from the bf16 inputs and the forward's bf16 O and fp32 LSE, then what
the reference solution (tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma.cu) and each margin decoy
compute, modelled at the roundings they make: P and dS rounded to bf16 as wgmma A operands, fp32
accumulation (modelled in fp64: its error is ~1e-7, far below bf16's), dQ summed per 64-key
block, bf16 outputs. Prints, per variant and output, the relative norm ||out - x|| / ||x|| (worst
over the draws of each S) against x = the exact gradient and x = the modelled solution, and the
estimate against the task's reference, cuDNN: the decoy's distance from the solution and the
solution's measured distance from cuDNN on the H200 (dQ 0.0036, dK 0.0042, dV 0.0001, worst of
both tasks; docs/results/2026-12-02-h200-tolerance-margins.md) added in quadrature. (dV is
nearly bit-identical between the solution and cuDNN, so a quadrature with cuDNN's own error
against fp64 would overstate it.) Then the worst 64-row block's relative norm against fp64 and
against the solution: the figure a per-block rule would see (where an error sits in a few rows,
as with the causal 1 % key skip, the whole-tensor norm dilutes it).

  /usr/bin/python3 tools/attention-dev/bwd_margin_sim.py [--causal] [--s 128,384,1024,4096]
      [--k-offset C] [--dq-sample-blocks N]

--dq-sample-blocks N models dQ alone (the solution, fp16 P/dS, bf16 dQ accumulation) on N evenly
spaced 64-row query blocks per head, in memory O(64 S): long sequences (S = 16384, 32768) on a
few cores. --k-offset C adds C to every element of K: softmax, hence every exact gradient, is
invariant to it, while bf16 partial sums of dQ carry it (docs/task-authoring.md, "Long sequences
and shifted keys").

Needs numpy (Debian: python3-numpy). A dev tool, not run by CI: its figures are quoted in the
decoys' headers (bwd_gen_variants.py) and docs/task-authoring.md; the H200 run is the proof.
Calibration: the reference solution's modelled error against fp64 should match cuDNN's measured
0.0021-0.0026, and sqrt(2) times it the H200's solution-vs-cuDNN 0.0034-0.0042.
"""
import argparse
import sys

import numpy as np

HEAD_DIM = 128
BLOCK = 64
# The reference solution's relative norm against cuDNN on the H200 (2026-12-02 run 3), worst of
# mha_bwd_d128 and mha_bwd_d128_causal.
SOLUTION_VS_CUDNN = {"dQ": 0.0036, "dK": 0.0042, "dV": 0.0001}
BOUND = 0.01


def bf16(x):
    """Round to bfloat16 (nearest even) and back, as cvt.rn.bf16 does."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32).astype(np.float64)


def mantissa3(x):
    """fp8 e4m3's 3 mantissa bits with an unconstrained exponent: the best any fp8 dS can do."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFFF) + ((u >> np.uint32(20)) & np.uint32(1))) & np.uint32(0xFFF00000)
    return u.view(np.float32).astype(np.float64)


def e4m3(x):
    """cvt.rn.satfinite.e4m3x2.f32: nearest even, subnormals below 2^-6, saturation at 448."""
    a = np.abs(x)
    exponent = np.floor(np.log2(np.maximum(a, 2.0**-6)))
    spacing = 2.0 ** (exponent - 3)
    return np.sign(x) * np.minimum(np.round(a / spacing) * spacing, 448.0)


def spiky(rng, shape, offset=0.0):
    """The task's spiky draw; `offset` shifts every element (a candidate distribution for K)."""
    x = rng.standard_normal(shape)
    spike = rng.random(shape) < 0.001
    return bf16(x + spike * 10.0 * rng.standard_normal(shape) + offset)


def forward(q, k, v, causal, scale):
    s = scale * (q @ k.T)
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - m)
    lse = (m + np.log(e.sum(axis=1, keepdims=True)))[:, 0]
    o = (e / e.sum(axis=1, keepdims=True)) @ v
    return bf16(o), lse.astype(np.float32).astype(np.float64)


def backward(q, k, v, o, do, lse, causal, scale, variant):
    """dQ, dK, dV of one head as `variant` computes them (None: exact fp64, unrounded)."""
    n = q.shape[0]
    s = scale * (q @ k.T)
    p = np.exp(s - lse[:, None])
    if causal:
        p = np.where(np.tril(np.ones(p.shape, dtype=bool)), p, 0.0)
    if variant == "skip_keys_1pct":
        p[:, n - n // 100:] = 0.0
    if variant == "skip_keys_10pct":
        blocks = n // BLOCK
        p[:, (blocks - (blocks + 5) // 10) * BLOCK:] = 0.0
    dp = do @ v.T
    delta = (do * o).sum(axis=1, keepdims=True)
    if variant == "no_delta":
        delta = 0.0 * delta
    ds = p * (dp - delta)
    if variant is None:
        return scale * ds @ k, scale * ds.T @ q, p.T @ do
    p_op, ds_op = bf16(p), bf16(ds)
    if variant == "p_fp8":
        p_op = e4m3(p * 256.0) / 256.0
    if variant == "ds_fp8":
        ds_op = mantissa3(ds)
    if variant == "fp16_p_ds":
        # fp16 operands on both sides (dO, Q, K are bf16 values: exact in fp16 unless below
        # 2^-24 or above 65504, which these inputs never are).
        p_op = p.astype(np.float16).astype(np.float64)
        ds_op = ds.astype(np.float16).astype(np.float64)
    dv = bf16(p_op.T @ do)
    dk = bf16(scale * (ds_op.T @ q))
    if variant == "dq_bf16_accumulation":
        # red.global.add.noftz.bf16x2 of each key block's bf16(scale * dS_blk K_blk) into the
        # bf16 dQ, in an arbitrary (CTA completion) order.
        acc = np.zeros_like(q)
        for block in np.random.default_rng(1).permutation(n // BLOCK):
            keys = slice(block * BLOCK, (block + 1) * BLOCK)
            acc = bf16(acc + bf16(scale * (ds_op[:, keys] @ k[keys])))
        dq = acc
    else:
        dq = bf16(scale * (ds_op @ k))
    if variant == "null_zeros":
        return 0 * dq, 0 * dk, 0 * dv
    if variant == "null_copy_inputs":
        return q, k, v
    return dq, dk, dv


def block_relative_norm(got, ref):
    """The largest relative norm over blocks of 64 rows (the whole row of D values)."""
    rows = got.shape[0] // BLOCK * BLOCK
    diff = ((got[:rows] - ref[:rows]) ** 2).reshape(-1, BLOCK, HEAD_DIM).sum(axis=(1, 2))
    norm = (ref[:rows] ** 2).reshape(-1, BLOCK, HEAD_DIM).sum(axis=(1, 2))
    # The engine's floor (compare.h kBlockNormFloor): a block is judged against at least 0.1 x
    # the norm of a block at the output's RMS.
    floor = 0.1 ** 2 * (ref[:rows] ** 2).mean() * BLOCK * HEAD_DIM
    return np.sqrt(diff / np.maximum(norm, max(floor, 1e-300))).max()


def draw_inputs(rng, n, k_offset):
    """Q, K, V, dO of one head, K shifted by k_offset in every element."""
    return tuple(spiky(rng, (n, HEAD_DIM), k_offset if i == 1 else 0.0) for i in range(4))


def dq_sampled(n, causal, sample_blocks, seed, variants, k_offset=0.0):
    """dQ alone, of `sample_blocks` evenly spaced 64-row query blocks of one head of length n.

    Each query row's dQ needs only its own row of P and dS (and all of K, V), so long sequences
    are simulated a query block at a time, in memory O(64 n). Returns per variant the relative
    norm against fp64 over the sampled rows (evenly spaced, so also an estimate of the whole
    head's) and the sampled blocks' relative norms (with the engine's floor, the output's RMS
    estimated from the sample).
    """
    scale = 1.0 / np.sqrt(HEAD_DIM)
    q, k, v, do = draw_inputs(np.random.default_rng(seed), n, k_offset)
    blocks = n // BLOCK
    sampled = np.unique(np.linspace(0, blocks - 1, min(sample_blocks, blocks)).round().astype(int))
    # The order in which key-block CTAs' red.global.add reach one query block: arbitrary.
    order = np.random.default_rng(1).permutation(blocks)
    diff2 = {name: [] for name in variants}
    apart2 = {name: [] for name in variants}
    ref2, solution2 = [], []
    for qb in sampled:
        rows = slice(qb * BLOCK, (qb + 1) * BLOCK)
        qc, doc = q[rows], do[rows]
        s = scale * (qc @ k.T)
        if causal:
            visible = np.arange(n)[None, :] <= np.arange(qb * BLOCK, (qb + 1) * BLOCK)[:, None]
            s = np.where(visible, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        lse = (m + np.log(e.sum(axis=1, keepdims=True)))[:, 0].astype(np.float32)
        o = bf16((e / e.sum(axis=1, keepdims=True)) @ v)
        p = np.exp(s - lse.astype(np.float64)[:, None])
        ds = p * (doc @ v.T - (doc * o).sum(axis=1, keepdims=True))
        exact = scale * ds @ k
        ref2.append((exact**2).sum())
        got = {}
        for name in variants:
            if name == "solution":
                dq = bf16(scale * (bf16(ds) @ k))
            elif name == "fp16_p_ds":
                dq = bf16(scale * (ds.astype(np.float16).astype(np.float64) @ k))
            elif name == "dq_bf16_accumulation":
                ds_op = bf16(ds)
                dq = np.zeros_like(qc)
                for kb in order:
                    if causal and kb > qb:
                        continue
                    keys = slice(kb * BLOCK, (kb + 1) * BLOCK)
                    dq = bf16(dq + bf16(scale * (ds_op[:, keys] @ k[keys])))
            else:
                raise ValueError(f"no dQ-only model of {name}")
            got[name] = dq
            diff2[name].append(((dq - exact)**2).sum())
        solution = got.get("solution", bf16(scale * (bf16(ds) @ k)))
        solution2.append((solution**2).sum())
        for name in variants:
            apart2[name].append(((got[name] - solution)**2).sum())
    ref2 = np.array(ref2)
    floor = 0.1**2 * ref2.mean()
    return {name: (float(np.sqrt(np.sum(d) / ref2.sum())),
                   float(np.sqrt(np.sum(apart2[name]) / np.sum(solution2))),
                   np.sqrt(np.array(d) / np.maximum(ref2, floor))) for name, d in diff2.items()}


DQ_SAMPLED_VARIANTS = ["solution", "fp16_p_ds", "dq_bf16_accumulation"]


def main_dq_sampled(args, sizes):
    print(f"{'causal' if args.causal else 'no mask'}, K offset {args.k_offset}: dQ alone, "
          f"{args.dq_sample_blocks} sampled 64-row query blocks per head, {args.draws} draws: "
          f"relative norm against fp64 (least-greatest over the draws: a decoy's margin is its "
          f"least) / estimated against cuDNN (distance from the modelled solution and the "
          f"solution's H200 {SOLUTION_VS_CUDNN['dQ']} in quadrature) | sampled blocks against "
          f"fp64: median / worst; bound {BOUND}")
    for n in sizes:
        results = [dq_sampled(n, args.causal, args.dq_sample_blocks,
                              1000 * n + draw + (7 if args.causal else 0), DQ_SAMPLED_VARIANTS,
                              args.k_offset)
                   for draw in range(args.draws)]
        print(f"S={n}")
        for name in DQ_SAMPLED_VARIANTS:
            overall = [r[name][0] for r in results]
            apart = [r[name][1] for r in results]
            blocks = np.concatenate([r[name][2] for r in results])
            cudnn = [float(np.hypot(a, SOLUTION_VS_CUDNN["dQ"])) for a in apart]
            print(f"  {name:22s} dQ {min(overall):.3g}-{max(overall):.3g} / {min(cudnn):.3g}-"
                  f"{max(cudnn):.3g} | blocks {np.median(blocks):.3g} / {blocks.max():.3g}")
    return 0


VARIANTS = ["solution", "null_zeros", "null_copy_inputs", "skip_keys_1pct", "skip_keys_10pct",
            "p_fp8", "ds_fp8", "dq_bf16_accumulation", "no_delta", "fp16_p_ds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--s", default="128,384,1024,4096")
    parser.add_argument("--draws", type=int, default=2, help="draws per S (one at S >= 4096)")
    parser.add_argument("--dq-sample-blocks", type=int, default=0,
                        help="simulate dQ alone (solution, fp16 P/dS, bf16 dQ accumulation) on "
                        "this many evenly spaced query blocks per head: long sequences, e.g. "
                        "--s 4096,16384,32768 --dq-sample-blocks 32")
    parser.add_argument("--k-offset", type=float, default=0.0,
                        help="add this to every element of K (softmax is invariant to it, so "
                        "are the exact gradients; bf16 partial sums of dQ are not)")
    args = parser.parse_args()
    if args.dq_sample_blocks > 0:
        return main_dq_sampled(args, [int(x) for x in args.s.split(",")])
    scale = 1.0 / np.sqrt(HEAD_DIM)
    worst = {name: {"dQ": {}, "dK": {}, "dV": {}} for name in VARIANTS}
    apart = {name: {"dQ": {}, "dK": {}, "dV": {}} for name in VARIANTS}
    block_worst = {name: {"dQ": {}, "dK": {}, "dV": {}} for name in VARIANTS}
    block_apart = {name: {"dQ": {}, "dK": {}, "dV": {}} for name in VARIANTS}
    sizes = [int(x) for x in args.s.split(",")]
    for n in sizes:
        for draw in range(1 if n >= 4096 else args.draws):
            rng = np.random.default_rng(1000 * n + draw + (7 if args.causal else 0))
            q, k, v, do = draw_inputs(rng, n, args.k_offset)
            o, lse = forward(q, k, v, args.causal, scale)
            exact = backward(q, k, v, o, do, lse, args.causal, scale, None)
            solution = backward(q, k, v, o, do, lse, args.causal, scale, "solution")
            for name in VARIANTS:
                got = backward(q, k, v, o, do, lse, args.causal, scale, name)
                for output, g, x, y in zip(("dQ", "dK", "dV"), got, exact, solution):
                    rel = float(np.linalg.norm(g - x) / np.linalg.norm(x))
                    worst[name][output][n] = max(worst[name][output].get(n, 0.0), rel)
                    rel = float(np.linalg.norm(g - y) / np.linalg.norm(y))
                    apart[name][output][n] = max(apart[name][output].get(n, 0.0), rel)
                    for table, ref in ((block_worst, x), (block_apart, y)):
                        rel = float(block_relative_norm(g, ref))
                        table[name][output][n] = max(table[name][output].get(n, 0.0), rel)
    print(f"{'causal' if args.causal else 'no mask'}, K offset {args.k_offset}: relative norm, "
          f"worst per S over the draws, against fp64 / the modelled solution / cuDNN "
          f"(estimated) | worst 64-row block against fp64 / the solution; bound {BOUND}")
    for name in VARIANTS:
        print(name)
        for output in ("dQ", "dK", "dV"):
            cells = []
            for n in sizes:
                e, d = worst[name][output][n], apart[name][output][n]
                cudnn = float(np.hypot(d, SOLUTION_VS_CUDNN[output]))
                be, bd = block_worst[name][output][n], block_apart[name][output][n]
                cells.append(f"S={n}: {e:.2g} / {d:.2g} / {cudnn:.2g} | {be:.2g} / {bd:.2g}"
                             .ljust(48))
            print(f"  {output} " + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
