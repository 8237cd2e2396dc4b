"""--fused-norms (model/fused_norm.py): a decoder layer's RMSNorms done by the
triton backend's GEMMs give the model's logits (eager and in a compiled
step), every layer's norm in the GEMMs but the first input norm and the final
norm; variants without the parts are left as they are."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from qgemm_bench.model import decode, fused_norm  # noqa: E402
from qgemm_bench.model.fuse import fuse_projections  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import quantize_model  # noqa: E402
from tests.support import CUDA, needs_gpu, one_thread, rel, seed  # noqa: E402, F401 (one_thread: autouse)

CPU = torch.device("cpu")
ON = [pytest.param(CPU, torch.float16, id="cpu"),  # the interpreter: float16
      pytest.param(CUDA, torch.bfloat16, id="cuda", marks=[pytest.mark.gpu, needs_gpu])]
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256)


def tiny(s: int, device=CPU, dtype=torch.float16):
    model = build_model(config_for("tiny", **TINY), device, dtype, s)
    fuse_projections(model)
    return model


def quantized(s: int, backend: str = "triton", device=CPU, dtype=torch.float16):
    model = tiny(s, device, dtype)
    with torch.no_grad():  # norm weights away from their 1.0 init, so a weight left out shows
        for layer in model.model.layers:
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                norm.weight.mul_(1 + 0.3 * torch.rand_like(norm.weight))
    quantize_model(model, backend, "int4-g32")
    return model


@torch.no_grad()
@pytest.mark.parametrize("device,dtype", ON)
def test_fused_norms_give_the_models_logits_eager_and_compiled(device, dtype):
    s = seed()
    plain, fused = quantized(s, device=device, dtype=dtype), quantized(s, device=device, dtype=dtype)
    assert fused_norm.why_not(fused) == ""
    fused_norm.install(fused)
    ids = decode.random_tokens(TINY["vocab_size"], 2, 7, s, device)
    want, got = plain(input_ids=ids).logits, fused(input_ids=ids).logits
    bound = 5e-3 if dtype == torch.float16 else 3e-2  # bf16 rounds 8x coarser
    assert rel(got, want) < bound, f"seed {s}: {rel(got, want)}"
    seen = []
    for layer in fused.model.layers:  # each GEMM's parts were used and handed on, none left behind
        attn, mlp = layer.self_attn, layer.mlp
        seen += [attn.qkv_proj.rms, attn.o_proj.residual, attn.o_proj.norm_out, mlp.gate_up_proj.rms,
                 mlp.down_proj.residual, mlp.down_proj.norm_out, getattr(layer, "_qgemm_in", None)]
    assert all(x is None for x in seen)
    # A decode step traced whole (fullgraph: a graph break raises) against the plain model's eager step.
    caches = [decode.static_cache(m, 7 + 4) for m in (plain, fused)]
    firsts = [decode.prefill(m, c, ids)[:, -1:].argmax(-1) for m, c in zip((plain, fused), caches, strict=True)]
    ref = decode.DecodeStep(plain, caches[0], 2, device)
    ref.tok.copy_(firsts[0])
    step = decode.DecodeStep(fused, caches[1], 2, device, compile="default")
    step.tok.copy_(firsts[0])
    try:
        assert rel(step(), ref()) < bound, f"seed {s}"
    finally:
        torch._dynamo.reset()


def test_variants_without_the_parts_are_refused_with_the_reason():
    s = seed()
    bf16 = tiny(s)
    assert "no RMSNorm parts" in fused_norm.why_not(bf16)
    assert "not fused" in fused_norm.why_not(build_model(config_for("tiny", **TINY), CPU, torch.float16, s))
    assert "no RMSNorm parts" in fused_norm.why_not(quantized(s, "torch"))
    with pytest.raises(ValueError, match="--fused-norms: layer 0"):
        fused_norm.install(bf16)
    other = quantized(s)  # a layer whose forward is not Llama's keeps it
    other.model.layers[0].__class__ = type("GraniteDecoderLayer", (type(other.model.layers[0]),), {})
    assert "layer 0 is a GraniteDecoderLayer" in fused_norm.why_not(other)


def test_a_run_with_fused_norms_marks_the_rows_that_took_them(tmp_path, monkeypatch):
    """The run's wiring (the triton kernels' parts are tested above): the
    torch backend given parts by torch (fused_gemm's fallbacks) takes it,
    tinygemm-like variants without parts and bf16 run as they are."""
    import json

    from qgemm_bench.backends.triton_kernels.fused_gemm import rms_scaled, with_residual
    from qgemm_bench.model import cli
    from qgemm_bench.model import quant_linear as ql

    real = ql.prepare_kernel

    def with_parts(backend, spec, *a, **kw):
        kernel = real(backend, spec, *a, **kw)
        if spec.group_size != 32:
            return kernel

        def parts(x, residual=None, norm_weight=None, rms=None):
            y = kernel.apply(x)
            y = y if rms is None else rms_scaled(y, *rms, x.shape[1])
            return y if residual is None else with_residual(y, residual, norm_weight)
        return kernel._replace(apply_parts=parts)

    monkeypatch.setattr(ql, "prepare_kernel", with_parts)
    out = tmp_path / "run"
    argv = ["--model", "tiny", "--layers", "2", "--device", "cpu", "--output-dir", str(out), "--batch", "1",
            "--prompt-len", "4", "--decode-steps", "2", "--quality-tokens", "1x8", "--backends", "bf16,torch",
            "--quant", "int4-g32,int4-g64", "--fused-norms", "--no-step-split"]
    assert cli.main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    took = {r["quant"]: r["fused_norms"] for r in doc["rows"]}
    assert took == {"none": False, "int4-g32": True, "int4-g64": False}
    assert all(r["status"] == "ok" for r in doc["rows"]) and doc["metadata"]["settings"]["fused_norms"] is True
    assert "--fused-norms: each layer's RMSNorms done by the GEMMs around them in torch int4-g32" in \
        (out / "report.md").read_text()
