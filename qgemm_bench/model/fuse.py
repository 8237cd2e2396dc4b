"""One GEMM where a decoder layer runs several over the same input, as gpt-fast
and the serving engines do: q, k and v as one `qkv_proj`, gate and up as one
`gate_up_proj` (their weights concatenated along the output dimension).

A Llama decoder layer otherwise runs seven GEMMs, four of them small (k and v
are 1024 wide on Llama-3-8B): at decode sizes each pays its launch and ramp,
so three fewer per layer is time a kernel cannot win back. Both the bf16 model
and every quantized one get it, so their ratio stays a like-for-like one
(`--unfused` runs the checkpoint's five GEMMs). int4 scales each output
column alone (per group of K, or per channel), so a fused weight quantizes
to the same codes and scales as the separate ones; NVFP4's one per-tensor
scale now spans q, k and v (gate and up), so its block scales round
differently, with the same error against the unquantized model.

The attention keeps transformers' forward, which calls q_proj, k_proj and
v_proj on the same tensor: each is a ProjectionPart whose first call runs the
fused projection for all three and whose last one drops the result. The MLP
is replaced by FusedMLP, transformers' LlamaMLP on the fused weight. With
pairs (--swiglu-epilogue, every variant) gate_up's columns alternate gate
and up, one pair per intermediate unit, so a GEMM's output tile holds both
halves of its products (model/swiglu.py's epilogue)."""

from __future__ import annotations

import torch
from torch import nn

ATTENTION = ("qkv_proj", ("q_proj", "k_proj", "v_proj"))
MLP = ("gate_up_proj", ("gate_proj", "up_proj"))
FUSED_LINEARS = (ATTENTION[0], MLP[0])


class ProjectionPart(nn.Module):
    """One of the projections fused into `owner.<fused>`: its columns of that
    GEMM, which runs once for all the parts called with one input tensor."""

    def __init__(self, owner: nn.Module, fused: str, sizes: tuple[int, ...], index: int):
        super().__init__()
        self._owner = [owner]  # a list, so the owner is not a submodule of its own part
        self.fused, self.sizes, self.index = fused, tuple(sizes), index
        self.out_features = sizes[index]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        owner = self._owner[0]
        pending = owner._qgemm_fused_pending
        if pending is None or pending[0] is not x:
            pending = (x, getattr(owner, self.fused)(x).split(self.sizes, dim=-1), 0)
        x_, parts, served = pending
        served += 1
        # Dropped after the last part: the output is not kept past the layer.
        owner._qgemm_fused_pending = None if served == len(self.sizes) else (x_, parts, served)
        return parts[self.index]

    def extra_repr(self) -> str:
        return f"columns {sum(self.sizes[:self.index])}:{sum(self.sizes[:self.index + 1])} of {self.fused}"


class FusedMLP(nn.Module):
    """down(act(gate(x)) * up(x)) with gate and up as one GEMM ([gate | up],
    or with pairs (gate, up) column pairs); with swiglu_prologue
    (model/swiglu.py) down_proj takes gate_up's output whole and computes
    silu(gate) * up itself; with swiglu_epilogue gate_up's GEMM returns it."""

    def __init__(self, gate_up_proj: nn.Linear, down_proj: nn.Module, act_fn, intermediate: int,
                 pairs: bool = False):
        super().__init__()
        self.gate_up_proj, self.down_proj, self.act_fn = gate_up_proj, down_proj, act_fn
        self.intermediate, self.pairs = intermediate, pairs
        self.swiglu_prologue = self.swiglu_epilogue = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.swiglu_epilogue:  # QuantLinear.pairs_out: silu(gate) * up
            return self.down_proj(self.gate_up_proj(x))
        h = self.gate_up_proj(x)
        if self.swiglu_prologue:
            self.down_proj.swiglu = True  # for this call (QuantLinear.forward)
            return self.down_proj(h)
        if self.pairs:
            gate, up = h.unflatten(-1, (self.intermediate, 2)).unbind(-1)
        else:
            gate, up = h.split((self.intermediate, self.intermediate), dim=-1)
        return self.down_proj(self.act_fn(gate) * up)


def concat_linears(linears: list[nn.Linear], pairs: bool = False) -> nn.Linear:
    """One nn.Linear computing all of `linears` (outputs side by side; pairs,
    two linears of one width: their outputs alternating column by column)."""
    w0 = linears[0].weight
    biases = [lin.bias for lin in linears]
    if any((b is None) != (biases[0] is None) for b in biases):
        raise ValueError("cannot fuse projections where only some have a bias")
    out = nn.Linear(w0.shape[1], sum(lin.out_features for lin in linears), bias=biases[0] is not None,
                    device=w0.device, dtype=w0.dtype)
    with torch.no_grad():
        cat = (lambda ts: torch.stack(ts, dim=1).flatten(0, 1)) if pairs else (lambda ts: torch.cat(ts, dim=0))
        out.weight.copy_(cat([lin.weight for lin in linears]))
        if out.bias is not None:
            out.bias.copy_(cat(biases))
    out.requires_grad_(False)
    return out


def fuse_projections(model: nn.Module, pairs: bool = False) -> int:
    """Fuse every decoder layer's q/k/v and gate/up projections, in place, one
    layer at a time (peak extra memory: one layer's); pairs: gate/up's
    columns in (gate, up) pairs (FusedMLP). Returns the layers fused."""
    layers = model.model.layers
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        fused, names = ATTENTION
        parts = [getattr(attn, n) for n in names]
        sizes = tuple(p.out_features for p in parts)
        setattr(attn, fused, concat_linears(parts))
        attn._qgemm_fused_pending = None
        for i, n in enumerate(names):
            setattr(attn, n, ProjectionPart(attn, fused, sizes, i))
        del parts
        gate, up = mlp.gate_proj, mlp.up_proj
        layer.mlp = FusedMLP(concat_linears([gate, up], pairs), mlp.down_proj, mlp.act_fn, gate.out_features, pairs)
        del gate, up, mlp
    return len(layers)
