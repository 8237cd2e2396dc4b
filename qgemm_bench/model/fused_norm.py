"""--fused-norms: a decoder layer's two RMSNorms done by the GEMMs around them.

A Llama layer runs input_layernorm before qkv and post_attention_layernorm
before gate_up, each (with the residual add before it) a kernel of its own:
at decode sizes about 2.6 us each on the H200, 64 a Llama-3-8B step
(docs/fused_gemm.md, "An RMSNorm between two GEMMs"). With our kernels'
output parts (fused_gemm.FusedGemm's residual / norm_weight / rms) they go
away: o_proj and down_proj finish with h = residual + y, h * the next norm's
weight and h's rows' sums of squares; qkv and gate_up take h * weight and
scale their rows by 1 / RMS(h). RMSNorm(h) @ W = (1 / RMS(h)) (h * weight) @ W.

The first layer's input norm parts come from torch (the embeddings have no
GEMM before them), and the last layer's down_proj adds its residual the
usual way, so the model's final norm (and lm_head) stay as they are. Only
variants whose every decoder GEMM is a QuantLinear with those parts (the
`triton` backend) take it, with q/k/v and gate/up fused (model/fuse.py) and
no tensor parallelism (there the all-reduce sits between GEMM and add).
"""

from __future__ import annotations

import types

import torch
from torch import nn

from qgemm_bench.backends.norm_parts import weighted_and_sums
from qgemm_bench.model.llama import NO_LAYERS, decoder_layers
from qgemm_bench.model.quant_linear import QuantLinear

NORMS = ("input_layernorm", "post_attention_layernorm")


def why_not(model: nn.Module) -> str:
    """Why --fused-norms cannot apply to `model` ("" where it can)."""
    layers = decoder_layers(model)
    if not layers:
        return NO_LAYERS
    for i, layer in enumerate(layers):
        # _forward is Llama's layer (pre-norm, plain residual adds, LlamaRMSNorm's variance_epsilon); a
        # checkpoint of another class (Granite's residual multiplier, Gemma's norm) keeps its own.
        if type(layer).__name__ != "LlamaDecoderLayer" or not all(
                hasattr(getattr(layer, n, None), "variance_epsilon") for n in NORMS):
            return f"layer {i} is a {type(layer).__name__}, not a LlamaDecoderLayer with LlamaRMSNorms"
        attn, mlp = layer.self_attn, layer.mlp
        linears = [getattr(attn, "qkv_proj", None), attn.o_proj, getattr(mlp, "gate_up_proj", None), mlp.down_proj]
        if any(lin is None for lin in linears):
            return "q/k/v and gate/up are not fused (--unfused)"
        if not all(isinstance(lin, QuantLinear) and lin.has_parts for lin in linears):
            return f"layer {i}: its GEMMs have no RMSNorm parts (the triton backend's have; no bias)"
    return ""


def install(model: nn.Module) -> None:
    """Each decoder layer's forward replaced by one whose norms the GEMMs do
    (ValueError with why_not's reason where that cannot be)."""
    if reason := why_not(model):
        raise ValueError(f"--fused-norms: {reason}")
    layers = model.model.layers
    for i, layer in enumerate(layers):
        layer._qgemm_next = (layers[i + 1],) if i + 1 < len(layers) else ()  # a tuple: not a submodule
        layer._qgemm_first = i == 0
        layer.forward = types.MethodType(_forward, layer)


def _forward(self, hidden_states: torch.Tensor, **kwargs) -> torch.Tensor:
    attn, mlp = self.self_attn, self.mlp
    if self._qgemm_first:
        xw, sums = weighted_and_sums(hidden_states, self.input_layernorm.weight)  # no GEMM before layer 0
    else:
        xw, sums = self._qgemm_in
        self._qgemm_in = None
    attn.qkv_proj.rms = (sums, self.input_layernorm.variance_epsilon)
    attn.o_proj.residual = (hidden_states, self.post_attention_layernorm.weight)
    h, _ = attn(hidden_states=xw, **kwargs)
    xw, sums = attn.o_proj.norm_out
    attn.o_proj.norm_out = None
    mlp.gate_up_proj.rms = (sums, self.post_attention_layernorm.variance_epsilon)
    if not self._qgemm_next:  # the last layer: the final norm is the model's own
        return h + mlp(xw)
    nxt = self._qgemm_next[0]
    mlp.down_proj.residual = (h, nxt.input_layernorm.weight)
    out = mlp(xw)
    nxt._qgemm_in = mlp.down_proj.norm_out
    mlp.down_proj.norm_out = None
    return out
