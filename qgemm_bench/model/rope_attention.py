"""--attention triton's decode step with the token's rotary and cache write in
the attention kernel.

Llama's attention rotates q and k, writes k and v into the static cache
(StaticLayer.update: an index_copy_ each and its count's add_), then
attends. In the compiled 8B step those took kernels of their own a layer
(on the H200, session 57's profile: a combo kernel of the rotary and cache
writes and one of the count's add and copy, 67 us a step at batch 1).
Here each decoder layer's attention forward hands q, k and v as the
projections leave them to qgemm::decode_attention_rope, whose kernel
rotates q and the new key, writes the key and value at the token's slot,
sets the layer's count to the slot + 1 and attends (decode_attention.py,
`rope`). Anything else (a prefill, the reference step, a cache without the
static layers' tensors) runs transformers' forward as it is.
"""

from __future__ import annotations

import types

import torch
from torch import nn

from qgemm_bench.model import ops
from qgemm_bench.model.llama import NO_LAYERS, decoder_layers

_ORIGINAL = "_qgemm_attention_forward"  # the forward install() replaced, kept on the module
RAN = "_qgemm_rope_ran"  # set on a layer's attention when a decode step took the fused path (ran())


def why_not(model: nn.Module) -> str:
    """Why the fused rotary cannot apply to `model` ("" where it can)."""
    layers = decoder_layers(model)
    if not layers:
        return NO_LAYERS
    for i, layer in enumerate(layers):
        attn = getattr(layer, "self_attn", None)
        # Llama's rotate_half rotary and one head_dim for q, k and v (a checkpoint of another class keeps its own)
        if type(attn).__name__ != "LlamaAttention" or not all(
                hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling")):
            return f"layer {i}'s attention is a {type(attn).__name__}, not a LlamaAttention"
    return ""


def install(model: nn.Module, on: bool = True) -> bool:
    """Each decoder layer's attention forward replaced by the fused one (on)
    or given back its own (off); returns whether the fused one is in."""
    on = on and not why_not(model)
    for layer in decoder_layers(model):
        attn = layer.self_attn
        if on and _ORIGINAL not in attn.__dict__:
            attn.__dict__[_ORIGINAL] = attn.forward
            attn.forward = types.MethodType(_forward, attn)
        elif not on and _ORIGINAL in attn.__dict__:
            attn.forward = attn.__dict__.pop(_ORIGINAL)
        attn.__dict__.pop(RAN, None)
    return on


def ran(model: nn.Module) -> bool:
    """Whether every decoder layer's attention took the fused path in a
    decode step since install (a forward that fell back in the step, e.g.
    another transformers' keywords, leaves its layer without the mark)."""
    layers = decoder_layers(model)
    return bool(layers) and all(getattr(layer.self_attn, RAN, False) for layer in layers)


def _forward(self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None, **kwargs):
    from qgemm_bench.model import decode

    original = self.__dict__[_ORIGINAL]
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    position_ids = kwargs.get("position_ids")
    layer = cache.layers[self.layer_idx] if cache is not None and hasattr(cache, "layers") else None
    b, q_len = hidden_states.shape[:2]
    if (q_len != 1 or position_ids is None or position_embeddings is None or self.training
            or not isinstance(getattr(layer, "keys", None), torch.Tensor)  # before the prefill's first update
            or not isinstance(getattr(layer, "cumulative_length", None), torch.Tensor) or decode.in_reference()
            or getattr(layer, "is_sliding", False)):  # a sliding window's slot is not the position
        return original(hidden_states, position_embeddings=position_embeddings, attention_mask=attention_mask,
                        **kwargs)
    d = self.head_dim
    q, k, v = (proj(hidden_states).view(b, -1, d) for proj in (self.q_proj, self.k_proj, self.v_proj))
    cos, sin = (t.reshape(-1, d).expand(b, d) for t in position_embeddings)  # one row for all: stride 0
    # The step's positions come from the first layer's count: changed inside an opaque op, Inductor may
    # recompute them after it (CPU Inductor, torch 2.13: the second layer rotated at position + 1), so that
    # one count keeps the cache's own add_; the others the kernel sets.
    first = self.layer_idx == 0
    out = ops.decode_attention_rope(q, k, v, cos, sin, layer.keys, layer.values,
                                    None if first else layer.cumulative_length, position_ids.reshape(-1)[-1:],
                                    float(self.scaling))
    if first:
        layer.cumulative_length.add_(1)
    setattr(self, RAN, True)  # under torch.compile a side effect Dynamo replays after the graph
    return self.o_proj(out.reshape(b, 1, -1)), None
