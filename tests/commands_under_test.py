"""The smallest runs of each writing command, shared by the output tests (tests/test_output_claims.py,
tests/test_outputs_vs_inputs.py): CPU and torch only, a few seconds at most; add the output options per test. The
timing options come from tests/cli_helpers.py's `timing`."""
from __future__ import annotations

from cli_helpers import timing

VERIFY = ["verify", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes", "2x8", "-q"]
PERF = ["perf", "--device", "cpu", "--backend", "torch", "--dtype", "bf16", "--shapes", "2x64", "--op", "fwd",
        "--mode", "hot", "-P", "1", *timing(runs=2, min_warmup_calls=1, target_run_s=0.001, max_iters=None), "-q"]
ABI = ["abi-compare", "--pair", "torch-entry", "--runtime-only", "--device", "cpu", "--in-process", "-P", "1",
       "-R", "1", "--op", "fwd", "--metric", "direct", "--shapes", "2x8", "-q"]
INSPECT = ["inspect", "--arch", "gfx942", "--dtype", "f32", "--shapes", "1x256", "--op", "fwd", "-q"]
PEAK = ["peak", "--device", "cpu", "--size-mib", "1", "--runs", "2"]

#: the tiniest run of each command that writes results, without --device (tests/test_command_matrix.py adds each
#: device this machine has, and every output): FlyDSL kernels beside torch where the command takes both
SMALLEST = {
    "verify": ["verify", "--backend", "flydsl,torch", "--dtype", "f32", "--shapes", "1x256", "-q"],
    "perf": ["perf", "--backend", "flydsl", "--dtype", "f32", "--shapes", "1x256", "--op", "fwd", "--mode", "hot",
             "-P", "1", *timing(runs=2, min_warmup_calls=1), "-q"],
    "abi-compare": ["abi-compare", "--dtype", "f32", "--shapes", "1x256", "--op", "fwd", "-P", "1", "--in-process",
                    *timing(runs=2, min_warmup_calls=1), "-q"],
    "inspect": INSPECT,
}
