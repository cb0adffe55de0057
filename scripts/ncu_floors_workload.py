"""Issue 31 item 7's workload for Nsight Compute: torch and Liger LayerNorm, bf16, forward and backward, over the
sweep set M·N = 2^26, N = 512 … 65536, each case launched REPS times inside the profiler's capture window.

Run under `ncu --profile-from-start off …` (scripts/device_ncu_floors.sh): only what lies between
cudaProfilerStart and cudaProfilerStop is profiled, so set-up, warm-up and the backward's forward stay out.
Each case starts with one marker launch (an int32 fill, a kernel nothing else here launches) so that the
launches can be told apart in ncu's CSV; the case order is printed as `case INDEX BACKEND OP M N` lines, which
scripts/ncu_floors_table.py reads back with the CSV.
"""
from __future__ import annotations

import sys

import torch

from lnbench.backends import get_backend

SWEEP_N = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
ELEMENTS = 2 ** 26
REPS = 3
EPS = 1e-5


def main() -> None:
    backends = sys.argv[1].split(",") if len(sys.argv) > 1 else ["torch", "liger"]
    dev = torch.device("cuda")
    cudart = torch.cuda.cudart()
    marker = torch.empty(1, dtype=torch.int32, device=dev)
    index = 0
    for name in backends:
        backend = get_backend(name)
        for n in SWEEP_N:
            m = ELEMENTS // n
            g = torch.Generator(device=dev).manual_seed(n)
            x = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g)
            dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g)
            w = (1 + 0.1 * torch.randn(n, device=dev, generator=g)).to(torch.bfloat16)
            b = (0.1 * torch.randn(n, device=dev, generator=g)).to(torch.bfloat16)
            for _ in range(2):                                     # warm-up: compiles, autotuning, allocations
                _, mean, rstd = backend.forward(x, w, b, EPS, store_stats=True)
                backend.backward(dy, x, w, mean, rstd)
            torch.cuda.synchronize()
            for op in ("fwd", "bwd"):
                print(f"case {index} {name} {op} {m} {n}", flush=True)
                cudart.cudaProfilerStart()
                marker.fill_(index)
                for _ in range(REPS):
                    if op == "fwd":
                        backend.forward(x, w, b, EPS, store_stats=True)
                    else:
                        backend.backward(dy, x, w, mean, rstd)
                torch.cuda.synchronize()
                cudart.cudaProfilerStop()
                index += 1
            del x, dy
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
