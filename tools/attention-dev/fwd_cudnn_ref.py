"""Writes inputs and cuDNN's forward outputs for attn_fwd_dev's cudnn_dir mode: per shape and
causal flag, DIR/BxHxS_c{0,1}_{q,k,v,o}.bin (bf16, [B,H,S,128] row-major) and _lse.bin (fp32,
[B,H,S]), computed with torch's cuDNN SDPA op with its log-sum-exp output (cuDNN's softmax stats),
which is what the engine's cuDNN baseline produces and compares candidates with.
usage: python3 fwd_cudnn_ref.py DIR 4x48x4096,1x2x128 [causal flags, default 0,1]"""
import math
import os
import sys

import torch

out_dir, shapes = sys.argv[1], sys.argv[2].split(",")
flags = [int(c) for c in (sys.argv[3] if len(sys.argv) > 3 else "0,1").split(",")]
os.makedirs(out_dir, exist_ok=True)
gen = torch.Generator(device="cuda").manual_seed(7)
for shape in shapes:
    B, H, S = (int(x) for x in shape.split("x"))
    D = 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float32, generator=gen)
               .to(torch.bfloat16) for _ in range(3))
    for causal in flags:
        res = torch.ops.aten._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, bool(causal), False, scale=1.0 / math.sqrt(D))
        o, lse = res[0].contiguous(), res[1].float().contiguous()
        assert o.shape == (B, H, S, D) and lse.numel() == B * H * S, (o.shape, lse.shape)
        pre = os.path.join(out_dir, f"{shape}_c{causal}_")
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
            t.cpu().numpy().tofile(pre + name + ".bin") if t.dtype == torch.float32 else \
                t.view(torch.int16).cpu().numpy().tofile(pre + name + ".bin")
        print(f"cudnn ref {shape} causal={causal}: o {tuple(o.shape)} lse {tuple(res[1].shape)} "
              f"lse[0,0,:3]={lse.flatten()[:3].tolist()}", flush=True)
