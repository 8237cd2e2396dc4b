"""--swiglu-epilogue (model/swiglu.py's install_epilogue): gate_up's columns
in (gate, up) pairs (model/fuse.py) and its GEMM returning silu(gate) * up.
The pairs alone give the [gate | up] model's logits (bf16 and every variant
run them); the triton backend's tiny model with the epilogue gives the plain
model's logits, alone (qgemm::linear_swiglu_out) and with the fused norms
(qgemm::linear_rms with swiglu_out), eager and in a compiled step; the ops'
fake shapes; variants without it are left as they are, with the reason."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from qgemm_bench.model import decode, fused_norm, ops, swiglu  # noqa: E402
from qgemm_bench.model.fuse import fuse_projections  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import quantize_model  # noqa: E402
from tests.support import one_thread, rel, seed  # noqa: E402, F401 (one_thread: autouse)
from tests.test_model_fused_norm import CPU, ON, TINY  # noqa: E402
from tests.test_model_swiglu import compiled_step_matches, logits_match, on_fused_kernel  # noqa: E402


def model_of(s: int, pairs: bool, backend: str | None = "triton", device=CPU, dtype=torch.float16,
             quant: str = "int4-g32"):
    """The tiny model fused with or without pairs, its norm weights off 1.0, quantized by backend."""
    model = build_model(config_for("tiny", **TINY), device, dtype, s)
    fuse_projections(model, pairs)
    gen = torch.Generator(device).manual_seed(s)
    with torch.no_grad():
        for layer in model.model.layers:
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                norm.weight.mul_(1 + 0.3 * torch.rand(norm.weight.shape, generator=gen, device=device))
    if backend is not None:
        quantize_model(model, backend, quant)
    return model


@torch.no_grad()
def test_pairs_are_the_same_model():
    s = seed()
    ids = decode.random_tokens(TINY["vocab_size"], 2, 7, s, CPU)
    halves, pairs = model_of(s, False, None), model_of(s, True, None)
    w = pairs.model.layers[0].mlp.gate_up_proj.weight
    ref = halves.model.layers[0].mlp.gate_up_proj.weight
    i = TINY["intermediate_size"]
    assert torch.equal(w[0::2], ref[:i]) and torch.equal(w[1::2], ref[i:]), f"seed {s}"
    assert rel(pairs(input_ids=ids).logits, halves(input_ids=ids).logits) < 1e-3, f"seed {s}"


@torch.no_grad()
@pytest.mark.parametrize("path", ["store", "fused"])
@pytest.mark.parametrize("norms", [True, False], ids=["fused-norms", "alone"])
@pytest.mark.parametrize("device,dtype", ON)
def test_the_epilogue_gives_the_models_logits_eager_and_compiled(device, dtype, norms, path, monkeypatch):
    """path "fused": every M on fused_kernel, so its epilogue (not torch's
    silu_mul_pairs, which the tiny shapes' split path takes) runs in the model."""
    epilogues = on_fused_kernel(monkeypatch, "swiglu_out") if path == "fused" else []
    s = seed()
    plain, model = model_of(s, False, device=device, dtype=dtype), model_of(s, True, device=device, dtype=dtype)
    if norms:
        fused_norm.install(model)
    assert swiglu.why_not_epilogue(model) == ""
    swiglu.install_epilogue(model)
    calls = []
    for layer in model.model.layers:  # every down_proj call took silu(gate) * up: [M, intermediate]
        layer.mlp.down_proj.register_forward_pre_hook(lambda mod, args: calls.append(args[0].shape[-1]))
    ids = logits_match(plain, model, s, device, dtype)
    assert calls == [TINY["intermediate_size"]] * TINY["num_hidden_layers"]
    compiled_step_matches(plain, model, ids, s, device, dtype)
    assert (path == "fused") == (True in epilogues)


@torch.no_grad()
def test_nvfp4_takes_the_epilogue_on_fused_kernel(monkeypatch):
    """NVFP4 (one tensor scale over gate and up, whichever order) with the fused norms, every M on fused_kernel."""
    epilogues = on_fused_kernel(monkeypatch, "swiglu_out")
    s = seed()
    plain, model = model_of(s, False, quant="nvfp4"), model_of(s, True, quant="nvfp4")
    fused_norm.install(model)
    swiglu.install_epilogue(model)
    logits_match(plain, model, s, CPU, torch.float16)
    assert True in epilogues


def test_the_ops_fake_implementations_give_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from qgemm_bench.backends.norm_parts import sumsq_chunks

    handle = torch.tensor(0, dtype=torch.int64)  # never read by the fake implementations
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(3, 64, dtype=torch.float16)
        y = ops.linear_swiglu_out(x, handle, 80)
        z = ops.linear_rms(x, handle, 80, torch.empty(3, sumsq_chunks(64)), 1e-5, True)
    assert y.shape == z.shape == (3, 40) and y.dtype == torch.float16


def test_variants_without_the_epilogue_are_refused_with_the_reason():
    s = seed()
    assert "not in (gate, up) pairs" in swiglu.why_not_epilogue(model_of(s, False))
    assert "no SwiGLU epilogue" in swiglu.why_not_epilogue(model_of(s, True, None))  # bf16: nn.Linear
    assert "no SwiGLU epilogue" in swiglu.why_not_epilogue(model_of(s, True, "torch"))
    assert "not fused" in swiglu.why_not_epilogue(build_model(config_for("tiny", **TINY), CPU, torch.float16, s))
    assert "in pairs" in swiglu.why_not(model_of(s, True))  # the prologue reads [gate | up]
    with pytest.raises(ValueError, match="--swiglu-epilogue: layer 0"):
        swiglu.install_epilogue(model_of(s, True, None))


@pytest.mark.parametrize("extra, why", [(["--swiglu-prologue"], "one or the other"),
                                        (["--unfused"], "needs gate/up fused"), ([], "runs on one GPU")])
def test_asking_for_the_epilogue_where_it_cannot_run_is_one_input_error(extra, why):
    from qgemm_bench import cli as runner
    from qgemm_bench.harness.distributed import World
    from qgemm_bench.model import cli
    from qgemm_bench.model.errors import InputError

    args = runner.parser().parse_args(["--model", "tiny", "--device", "cpu", "--quant", "int4-g64",
                                       "--backends", "torch", "--swiglu-epilogue", "--no-fused-norms", *extra])
    with pytest.raises(InputError, match=why):
        cli.build_plan(args, None if extra else World(0, 2, 0))


@pytest.mark.parametrize("flag", [["--swiglu-epilogue"], [], ["--no-swiglu-epilogue"]])
def test_a_run_marks_the_rows_that_took_the_epilogue(tmp_path, monkeypatch, flag):
    """The run's wiring (the triton kernels are tested above): the torch
    backend given parts and the epilogue by torch (fused_gemm's fallbacks)
    takes it at int4-g32; int4-g64 without them and bf16 run the pairs as
    they are; on by default; the settings record the switch for the A/B."""
    import json

    from qgemm_bench.backends.triton_kernels.fused_gemm import rms_scaled, silu_mul_pairs, with_residual
    from qgemm_bench.model import cli
    from qgemm_bench.model import quant_linear as ql

    real = ql.prepare_kernel

    def with_parts(backend, spec, *a, **kw):
        kernel = real(backend, spec, *a, **kw)
        if spec.group_size != 32:
            return kernel

        def parts(x, residual=None, norm_weight=None, rms=None, swiglu_out=False):
            y = kernel.apply(x)
            y = y if rms is None else rms_scaled(y, *rms, x.shape[1])
            y = silu_mul_pairs(y) if swiglu_out else y
            return y if residual is None else with_residual(y, residual, norm_weight)
        return kernel._replace(apply_parts=parts, swiglu_out=True)

    monkeypatch.setattr(ql, "prepare_kernel", with_parts)
    out = tmp_path / "run"
    argv = ["--model", "tiny", "--layers", "2", "--device", "cpu", "--output-dir", str(out), "--batch", "1",
            "--prompt-len", "4", "--decode-steps", "2", "--quality-tokens", "1x8", "--backends", "bf16,torch",
            "--quant", "int4-g32,int4-g64", *flag, "--no-step-split"]
    assert cli.main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    on = flag != ["--no-swiglu-epilogue"]  # on by default
    took = {r["quant"]: r["swiglu_epilogue"] for r in doc["rows"]}
    assert took == {"none": False, "int4-g32": on, "int4-g64": False}
    assert all(r["status"] == "ok" for r in doc["rows"]) and doc["metadata"]["settings"]["swiglu_epilogue"] is on
    said = "its GEMM returns silu(gate) * up in torch int4-g32"
    assert (said in (out / "report.md").read_text()) is on
