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
@pytest.mark.parametrize("path", ["store", "fused"])
@pytest.mark.parametrize("norms", [True, False], ids=["fused-norms", "alone"])
@pytest.mark.parametrize("device,dtype", ON)
def test_the_prologue_gives_the_models_logits_eager_and_compiled(device, dtype, norms, path, monkeypatch):
    """path "fused": every M on fused_kernel, so its prologue (not torch's
    silu_mul, which the tiny shapes' split path takes) runs in the model."""
    prologues = on_fused_kernel(monkeypatch, "swiglu") if path == "fused" else []
    s = seed()
    plain, model = quantized(s, device=device, dtype=dtype), quantized(s, device=device, dtype=dtype)
    if norms:
        fused_norm.install(model)
    assert swiglu.why_not(model) == ""
    swiglu.install(model)
    calls = []
    for layer in model.model.layers:  # every down_proj call took h whole: [M, 2 x intermediate]
        layer.mlp.down_proj.register_forward_pre_hook(lambda mod, args: calls.append(args[0].shape[-1]))
    ids = logits_match(plain, model, s, device, dtype)
    assert calls == [2 * TINY["intermediate_size"]] * TINY["num_hidden_layers"]
    assert not any(layer.mlp.down_proj.swiglu for layer in model.model.layers)  # set for one call only
    compiled_step_matches(plain, model, ids, s, device, dtype)
    assert (path == "fused") == (True in prologues)


def on_fused_kernel(monkeypatch, flag: str) -> list:
    """Every M on fused_kernel (the tiny shapes' split path would take the
    torch form); returns the list each FusedGemm call appends its `flag`
    keyword (swiglu or swiglu_out) to."""
    from qgemm_bench.backends.triton_kernels import fused_gemm, weight_only

    seen = []
    monkeypatch.setattr(weight_only.WeightOnlyGemm, "path", lambda self, m: "fused")
    real = fused_gemm.FusedGemm.__call__

    def counted(self, *a, **kw):
        seen.append(kw.get(flag, False))
        return real(self, *a, **kw)

    monkeypatch.setattr(fused_gemm.FusedGemm, "__call__", counted)
    return seen


def bound(dtype) -> float:
    return 5e-3 if dtype == torch.float16 else 3e-2  # bf16 rounds 8x coarser


def logits_match(plain, model, s: int, device, dtype) -> torch.Tensor:
    """The model's logits on random tokens (2 x 7) against the plain
    model's; returns the tokens."""
    ids = decode.random_tokens(TINY["vocab_size"], 2, 7, s, device)
    want, got = plain(input_ids=ids).logits, model(input_ids=ids).logits
    assert rel(got, want) < bound(dtype), f"seed {s}: {rel(got, want)}"
    return ids


def compiled_step_matches(plain, model, ids, s: int, device, dtype) -> None:
    """A decode step of the model traced whole (fullgraph: a graph break
    raises) against the plain model's eager step, both after ids."""
    caches = [decode.static_cache(m, 7 + 4) for m in (plain, model)]
    firsts = [decode.prefill(m, c, ids)[:, -1:].argmax(-1) for m, c in zip((plain, model), caches, strict=True)]
    ref = decode.DecodeStep(plain, caches[0], 2, device)
    ref.tok.copy_(firsts[0])
    step = decode.DecodeStep(model, caches[1], 2, device, compile="default")
    step.tok.copy_(firsts[0])
    try:
        assert rel(step(), ref()) < bound(dtype), f"seed {s}"
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


@pytest.mark.parametrize("extra, world, on", [([], None, False), (["--swiglu-prologue"], None, True),
                                              (["--no-fused-norms"], None, False),
                                              (["--no-fused-norms", "--swiglu-prologue"], None, True),
                                              (["--unfused"], None, False), ([], (0, 2, 0), False)])
def test_the_prologue_runs_only_when_asked_for(extra, world, on):
    """Off by default (the 8B compiled step with it did not finish on the
    H200); asked for it runs with or without the fused norms."""
    from qgemm_bench import cli as runner
    from qgemm_bench.harness.distributed import World
    from qgemm_bench.model import cli

    args = runner.parser().parse_args(["--model", "tiny", "--device", "cpu", "--quant", "int4-g64",
                                       "--backends", "torch", *extra])
    assert cli.build_plan(args, world and World(*world)).swiglu_prologue is on


@pytest.mark.parametrize("extra, why", [(["--unfused"], "needs gate/up fused"), ([], "runs on one GPU")])
def test_asking_for_the_prologue_where_it_cannot_run_is_one_input_error(extra, why):
    from qgemm_bench import cli as runner
    from qgemm_bench.harness.distributed import World
    from qgemm_bench.model import cli
    from qgemm_bench.model.errors import InputError

    args = runner.parser().parse_args(["--model", "tiny", "--device", "cpu", "--quant", "int4-g64",
                                       "--backends", "torch", "--swiglu-prologue", "--no-fused-norms", *extra])
    with pytest.raises(InputError, match=why):
        cli.build_plan(args, None if extra else World(0, 2, 0))


@pytest.mark.parametrize("flag", ["--swiglu-prologue", "--no-swiglu-prologue"])
def test_a_run_marks_the_rows_that_took_the_prologue(tmp_path, monkeypatch, flag):
    """The run's wiring (the triton kernels are tested above): the torch
    backend given parts and the prologue by torch (fused_gemm's fallbacks)
    takes it at int4-g32; int4-g64 without them and bf16 run as they are;
    the settings record the switch for the GPU's A/B."""
    import json

    from qgemm_bench.backends.triton_kernels.fused_gemm import rms_scaled, silu_mul, with_residual
    from qgemm_bench.model import cli
    from qgemm_bench.model import quant_linear as ql

    real = ql.prepare_kernel

    def with_parts(backend, spec, *a, **kw):
        kernel = real(backend, spec, *a, **kw)
        if spec.group_size != 32:
            return kernel

        def parts(x, residual=None, norm_weight=None, rms=None, swiglu=False):
            x = silu_mul(x) if swiglu else x
            y = kernel.apply(x)
            y = y if rms is None else rms_scaled(y, *rms, x.shape[1])
            return y if residual is None else with_residual(y, residual, norm_weight)
        return kernel._replace(apply_parts=parts, swiglu=True)

    monkeypatch.setattr(ql, "prepare_kernel", with_parts)
    out = tmp_path / "run"
    argv = ["--model", "tiny", "--layers", "2", "--device", "cpu", "--output-dir", str(out), "--batch", "1",
            "--prompt-len", "4", "--decode-steps", "2", "--quality-tokens", "1x8", "--backends", "bf16,torch",
            "--quant", "int4-g32,int4-g64", flag, "--no-step-split"]
    assert cli.main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    on = flag == "--swiglu-prologue"
    took = {r["quant"]: r["swiglu_prologue"] for r in doc["rows"]}
    assert took == {"none": False, "int4-g32": on, "int4-g64": False}
    assert all(r["status"] == "ok" for r in doc["rows"]) and doc["metadata"]["settings"]["swiglu_prologue"] is on
    said = "--swiglu-prologue: down_proj computes silu(gate) * up as it loads gate_up's output in torch int4-g32"
    assert (said in (out / "report.md").read_text()) is on
