"""--swiglu-prologue (model/swiglu.py): down_proj computes silu(gate) * up as
it loads gate_up's output. The triton backend's tiny model gives the plain
model's logits with it, alone (qgemm::linear_swiglu) and with the fused norms
(qgemm::linear_residual with swiglu), eager and in a compiled step; the ops'
fake shapes; variants without it are left as they are, with the reason."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from qgemm_bench.model import decode, fused_norm, ops, swiglu  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from tests.support import one_thread, rel, seed  # noqa: E402, F401 (one_thread: autouse)
from tests.test_model_fused_norm import CPU, ON, TINY, quantized, tiny  # noqa: E402


@torch.no_grad()
@pytest.mark.parametrize("norms", [True, False], ids=["fused-norms", "alone"])
@pytest.mark.parametrize("device,dtype", ON)
def test_the_prologue_gives_the_models_logits_eager_and_compiled(device, dtype, norms):
    s = seed()
    plain, model = quantized(s, device=device, dtype=dtype), quantized(s, device=device, dtype=dtype)
    if norms:
        fused_norm.install(model)
    assert swiglu.why_not(model) == ""
    swiglu.install(model)
    calls = []
    for layer in model.model.layers:  # every down_proj call took h whole: [M, 2 x intermediate]
        layer.mlp.down_proj.register_forward_pre_hook(lambda mod, args: calls.append(args[0].shape[-1]))
    ids = decode.random_tokens(TINY["vocab_size"], 2, 7, s, device)
    want, got = plain(input_ids=ids).logits, model(input_ids=ids).logits
    bound = 5e-3 if dtype == torch.float16 else 3e-2  # bf16 rounds 8x coarser
    assert rel(got, want) < bound, f"seed {s}: {rel(got, want)}"
    assert calls == [2 * TINY["intermediate_size"]] * TINY["num_hidden_layers"]
    assert not any(layer.mlp.down_proj.swiglu for layer in model.model.layers)  # set for one call only
    # A decode step traced whole (fullgraph: a graph break raises) against the plain model's eager step.
    caches = [decode.static_cache(m, 7 + 4) for m in (plain, model)]
    firsts = [decode.prefill(m, c, ids)[:, -1:].argmax(-1) for m, c in zip((plain, model), caches, strict=True)]
    ref = decode.DecodeStep(plain, caches[0], 2, device)
    ref.tok.copy_(firsts[0])
    step = decode.DecodeStep(model, caches[1], 2, device, compile="default")
    step.tok.copy_(firsts[0])
    try:
        assert rel(step(), ref()) < bound, f"seed {s}"
    finally:
        torch._dynamo.reset()


def test_the_ops_fake_implementations_give_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from qgemm_bench.backends.norm_parts import sumsq_chunks

    handle = torch.tensor(0, dtype=torch.int64)  # never read by the fake implementations
    with FakeTensorMode(allow_non_fake_inputs=True):
        h = torch.empty(3, 2 * 96, dtype=torch.float16)
        y = ops.linear_swiglu(h, handle, 40)
        r = torch.empty(3, 40, dtype=torch.float16)
        outs = ops.linear_residual(h, handle, 40, r, torch.empty(40, dtype=torch.float16), True)
    assert y.shape == (3, 40) and y.dtype == torch.float16
    assert [tuple(t.shape) for t in outs] == [(3, 40), (3, 40), (3, sumsq_chunks(40))]
    assert outs[2].dtype == torch.float32


def test_variants_without_the_prologue_are_refused_with_the_reason():
    s = seed()
    assert "no SwiGLU prologue" in swiglu.why_not(tiny(s))  # bf16: nn.Linear
    assert "not fused" in swiglu.why_not(build_model(config_for("tiny", **TINY), CPU, torch.float16, s))
    assert "no SwiGLU prologue" in swiglu.why_not(quantized(s, "torch"))
    with pytest.raises(ValueError, match="--swiglu-prologue: layer 0"):
        swiglu.install(tiny(s))
    other = quantized(s)
    other.model.layers[1].mlp.act_fn = torch.nn.GELU()
    assert "layer 1: its MLP's activation is GELU" in swiglu.why_not(other)
    # A kernel whose parts take no prologue: the model leaves it alone, and the op refuses in one line.
    parts_only = quantized(s)
    down = parts_only.model.layers[0].mlp.down_proj
    down.kernel = down.kernel._replace(swiglu=False)
    assert down.has_parts and "layer 0: its down_proj has no SwiGLU prologue" in swiglu.why_not(parts_only)
    handle = ops.register(down, down.kernel.apply, down.out_features, down.kernel.apply_parts, False)
    h = torch.zeros(1, 2 * down.in_features, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="qgemm::linear_swiglu: the registered kernel has no SwiGLU prologue"):
        ops.linear_swiglu(h, handle, down.out_features)
    bare = ops.register(down, down.kernel.apply, down.out_features)
    with pytest.raises(RuntimeError, match="no RMSNorm parts"):
        ops.linear_swiglu(h, bare, down.out_features)

