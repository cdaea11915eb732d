"""Times cuDNN's SDPA forward (through torch) on the timed workload of mha_with_lse_d128 and
its causal variant, as the ratio's denominator: median of N CUDA-event samples, 256 MB L2 flush
before each, after a warm-up. Run on the device with the torch venv's python."""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
B, H, S, D = 4, 48, 4096, 128
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for causal in (False, True):
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for _ in range(5):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        times = []
        for i in range(iters):
            flush.fill_(i & 0xFF)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
    times.sort()
    flops = (2 if causal else 4) * B * H * S * S * D
    med = times[len(times) // 2]
    print(f"CUDNN causal={int(causal)} median_ms={med:.4f} min_ms={times[0]:.4f} "
          f"max_ms={times[-1]:.4f} TFLOPs={flops / med / 1e9:.1f} n={iters}", flush=True)
