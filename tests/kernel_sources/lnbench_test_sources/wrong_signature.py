"""Test kernel source that breaks the contract: its forward launcher takes no Beta (3 buffers, not 4/6)."""
import flydsl.compiler as flyc
import flydsl.expr as fx


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    @flyc.jit
    def launch(Input: fx.Pointer, Gamma: fx.Pointer, Output: fx.Pointer, m: fx.Int32,
               stream: fx.Stream = fx.Stream(None)):
        pass
    return launch
