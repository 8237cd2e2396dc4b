"""The SwiGLU prologue: down_proj computes silu(gate) * up as it loads its input.

A Llama MLP runs down_proj(silu(gate) * up) with gate and up from one GEMM
(model/fuse.py's FusedMLP); compiled, the silu * mul is an Inductor kernel
of its own between the two GEMMs (on the H200 about 0.6 us a layer at batch
1: docs/model.md). With the prologue (fused_gemm.fused_kernel's SWIGLU)
down_proj takes gate_up's output h = [gate | up] and computes the product,
in fp32 and rounded once, where it loads each x tile: no kernel and no
[M, I] tensor between the GEMMs. In a --fused-norms layer it combines with
down_proj's output parts (the residual add and the next norm's parts):
qgemm::linear_residual with swiglu; elsewhere qgemm::linear_swiglu.

Only variants whose down_proj kernels take it (the triton backend's:
Prepared.swiglu) and whose MLP is FusedMLP with SiLU (q/k/v and gate/up
fused) get it; the others keep Inductor's silu * mul. Not under tensor
parallelism (cli refuses it there, as the fused norms).

The SwiGLU epilogue (install_epilogue, --swiglu-epilogue) does it on the
other side: gate_up's columns come in (gate, up) pairs (model/fuse.py's
pairs, in every variant, so they all read the same layout), and the GEMM's
last store computes silu(gate) * up from each tile's pairs
(fused_gemm.fused_kernel's SWIGLU_OUT): gate_up writes [M, I] instead of
[M, 2I] and down_proj runs as it is. The activation is computed once per
output element (the prologue recomputes it in each of down_proj's N tiles).
Variants whose gate_up kernels take it (Prepared.swiglu_out: the triton
backend's) get it; the others run Inductor's silu * mul on the pairs.
"""

from __future__ import annotations

from torch import nn

from qgemm_bench.model.fuse import FusedMLP
from qgemm_bench.model.llama import NO_LAYERS, decoder_layers
from qgemm_bench.model.quant_linear import QuantLinear

SILU = ("SiLU", "SiLUActivation")  # torch's module and transformers' (ACT2FN["silu"])


def _why_not(model: nn.Module, check) -> str:
    """"" where every decoder layer's MLP is a FusedMLP with SiLU that
    check(i, mlp) passes (it returns "" or its reason); else the first reason."""
    layers = decoder_layers(model)
    if not layers:
        return NO_LAYERS
    for i, layer in enumerate(layers):
        mlp = getattr(layer, "mlp", None)
        if not isinstance(mlp, FusedMLP):
            return "gate/up are not fused (--unfused)"
        if type(mlp.act_fn).__name__ not in SILU:
            return f"layer {i}: its MLP's activation is {type(mlp.act_fn).__name__}, not SiLU"
        if reason := check(i, mlp):
            return reason
    return ""


def why_not(model: nn.Module) -> str:
    """Why the SwiGLU prologue cannot apply to `model` ("" where it can)."""
    def check(i, mlp):
        if mlp.pairs:
            return "gate/up's columns are in pairs (--swiglu-epilogue); the prologue reads [gate | up]"
        if not (isinstance(mlp.down_proj, QuantLinear) and mlp.down_proj.has_swiglu):
            return f"layer {i}: its down_proj has no SwiGLU prologue (the triton backend's has; no bias)"
        return ""
    return _why_not(model, check)


def install(model: nn.Module) -> None:
    """Each layer's FusedMLP hands gate_up's output to down_proj whole
    (ValueError with why_not's reason where that cannot be)."""
    if reason := why_not(model):
        raise ValueError(f"--swiglu-prologue: {reason}")
    for layer in model.model.layers:
        layer.mlp.swiglu_prologue = True


def why_not_epilogue(model: nn.Module) -> str:
    """Why the SwiGLU epilogue cannot apply to `model` ("" where it can)."""
    def check(i, mlp):
        if not mlp.pairs:
            return "gate/up's columns are not in (gate, up) pairs (model/fuse.py's pairs)"
        if mlp.swiglu_prologue:
            return f"layer {i}: its down_proj takes the SwiGLU prologue"
        if not (isinstance(mlp.gate_up_proj, QuantLinear) and mlp.gate_up_proj.has_swiglu_out):
            return f"layer {i}: its gate_up has no SwiGLU epilogue (the triton backend's has; no bias)"
        return ""
    return _why_not(model, check)


def install_epilogue(model: nn.Module) -> None:
    """Each layer's gate_up returns silu(gate) * up of its column pairs, which
    FusedMLP hands to down_proj (ValueError with why_not_epilogue's reason
    where that cannot be)."""
    if reason := why_not_epilogue(model):
        raise ValueError(f"--swiglu-epilogue: {reason}")
    for layer in model.model.layers:
        layer.mlp.gate_up_proj.pairs_out = True
        layer.mlp.swiglu_epilogue = True
