"""Launch torch and Liger LayerNorm forward (bf16, rotating inputs) at 4096x4096 and 32768x8192, 10 calls each,
for Nsight Compute: ncu -k regex:layer_norm --metrics gpu__time_duration.sum --csv python3 scripts/ncu_layernorm_fwd.py
Each kernel is then told apart by its name and grid size (issue 12's ncu reference)."""
import torch

from lnbench.backends import get_backend

dev = torch.device("cuda")
for name in ("torch", "liger"):
    backend = get_backend(name)
    for m, n in ((4096, 4096), (32768, 8192)):
        g = torch.Generator(device=dev).manual_seed(0)
        xs = [torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3)]
        w = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
        b = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
        for i in range(10):
            backend.forward(xs[i % 3], w, b, 1e-5, store_stats=True)
        torch.cuda.synchronize()
        print(name, m, n, "done", flush=True)
