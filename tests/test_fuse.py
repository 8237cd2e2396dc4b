"""Fused projections (model/fuse.py): q/k/v and gate/up as one GEMM each give
the separate projections' outputs, unquantized and quantized, eager and in a
compiled step, with 4 GEMMs a layer instead of 7 and nothing kept between
calls."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from qgemm_bench.model import decode  # noqa: E402
from qgemm_bench.model.fuse import FusedMLP, ProjectionPart, fuse_projections  # noqa: E402
from qgemm_bench.model.llama import ModelSource, build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import QuantLinear, quantize_model, target_names  # noqa: E402
from tests.support import one_thread, rel, seed  # noqa: E402, F401 (autouse: the tiny model on one thread)

CPU = torch.device("cpu")
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256)


def pair(s: int):
    cfg = config_for("tiny", **TINY)
    return build_model(cfg, CPU, torch.float32, s), build_model(cfg, CPU, torch.float32, s)


def layer0_linears(model) -> dict:
    return {n.rsplit(".", 1)[-1]: m for n, m in model.named_modules()
            if ".layers.0." in f".{n}" and isinstance(m, (torch.nn.Linear, QuantLinear))}


@torch.no_grad()
@pytest.mark.parametrize("quant", [None, "int4-g32", "int4-channel"])
def test_a_fused_model_computes_what_the_separate_projections_do(quant):
    """int4 scales per column (a group of K or all of it): the fused weight's
    codes and scales are the separate ones', so the outputs agree."""
    s = seed()
    plain, fused = pair(s)
    assert fuse_projections(fused) == 2
    if quant:
        quantize_model(plain, "torch", quant)
        quantize_model(fused, "torch", quant)
    ids = decode.random_tokens(TINY["vocab_size"], 2, 9, s, CPU)
    want, got = plain(ids).logits, fused(ids).logits
    assert rel(got, want) < 1e-5, f"seed {s}"
    attn = fused.model.layers[0].self_attn
    assert isinstance(attn.q_proj, ProjectionPart) and isinstance(fused.model.layers[0].mlp, FusedMLP)
    assert attn._qgemm_fused_pending is None  # no output kept past the layer
    linears = layer0_linears(fused)
    assert sorted(linears) == ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"]
    assert all(isinstance(m, QuantLinear if quant else torch.nn.Linear) for m in linears.values())
    assert (linears["qkv_proj"].in_features, linears["qkv_proj"].out_features) == (64, 4 * 16 + 2 * 2 * 16)
    if not quant:
        assert target_names(fused) == [n for n, m in fused.named_modules() if ".layers." in n and n in
                                       {f"model.layers.{i}.{p}" for i in (0, 1) for p in
                                        ("self_attn.o_proj", "self_attn.qkv_proj", "mlp.gate_up_proj",
                                         "mlp.down_proj")}]


@torch.no_grad()
def test_nvfp4_of_a_fused_weight_is_as_close_to_the_model_as_the_separate_ones():
    """NVFP4's one per-tensor scale now spans q, k and v (gate and up): the
    block scales round differently, the error against the unquantized model
    stays what it was."""
    s = seed()
    ref, fused = pair(s)
    plain, _ = pair(s)
    fuse_projections(fused)
    quantize_model(plain, "torch", "nvfp4")
    quantize_model(fused, "torch", "nvfp4")
    ids = decode.random_tokens(TINY["vocab_size"], 2, 9, s, CPU)
    want = ref(ids).logits
    e_plain, e_fused = rel(plain(ids).logits, want), rel(fused(ids).logits, want)
    assert 0 < e_fused < 1.5 * e_plain and e_fused < 0.3, (e_fused, e_plain, f"seed {s}")


@torch.no_grad()
def test_a_compiled_step_of_a_fused_quantized_model_is_one_graph_with_4_gemms_a_layer():
    s = seed()
    plain, fused = pair(s)
    fuse_projections(fused)
    for m in (plain, fused):
        quantize_model(m, "torch", "int4-g32")
        decode.use_decode_attention(m)
    calls = []
    for mod in fused.modules():
        if isinstance(mod, QuantLinear):
            mod.register_forward_pre_hook(lambda mod, args: calls.append(mod.out_features))
    batch, prompt = 2, 5
    ids = decode.random_tokens(TINY["vocab_size"], batch, prompt, s, CPU)
    caches = [decode.static_cache(m, prompt + 4) for m in (plain, fused)]
    firsts = [decode.prefill(m, c, ids)[:, -1:].argmax(-1) for m, c in zip((plain, fused), caches, strict=True)]
    assert torch.equal(*firsts)
    ref = decode.DecodeStep(plain, caches[0], batch, CPU)
    ref.tok.copy_(firsts[0])
    calls.clear()
    eager = decode.DecodeStep(fused, caches[1], batch, CPU)
    eager.tok.copy_(firsts[1])
    want, got = ref(), eager()
    assert rel(got, want) < 1e-5, f"seed {s}"
    assert calls == [128, 64, 256, 64] * 2  # qkv, o, gate_up, down per layer
    decode.rewind(caches[1], prompt)
    step = decode.DecodeStep(fused, caches[1], batch, CPU, compile="default")  # fullgraph: a break raises
    step.tok.copy_(firsts[1])
    try:
        assert rel(step(), want) < 1e-5, f"seed {s}"
    finally:
        torch._dynamo.reset()


def test_every_variant_of_a_source_is_fused_unless_asked_not_to():
    src = ModelSource.preset("tiny", torch.float32, 0, **TINY)
    assert isinstance(src.fresh(CPU).model.layers[1].mlp, FusedMLP) and src.describe()["fused_projections"]
    src.fused = False
    assert not isinstance(src.fresh(CPU).model.layers[1].mlp, FusedMLP)
    assert src.describe()["fused_projections"] is False
