"""End-to-end model benchmark (qgemm_bench.model) on CPU: QuantLinear against
the dequantized reference, quantize_model's swaps, the static-cache decode step,
perplexity against an independent computation, and the tiny run's outputs."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("transformers")

from qgemm_bench.harness import signals  # noqa: E402
from qgemm_bench.model import bench, cli, decode, llama, quality  # noqa: E402
from qgemm_bench.model import quant_linear as ql  # noqa: E402
from qgemm_bench.model.errors import BackendUnavailable, InputError  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import QuantLinear, parse_quant, quantize_model  # noqa: E402
from qgemm_bench.operators import formats  # noqa: E402
from tests.support import one_thread, rel  # noqa: E402, F401 (autouse: the tiny model on one thread)

CPU = torch.device("cpu")
LEADING = [(5,), (2, 3), (1, 1, 7), (0,)]


def tiny(layers: int = 2, seed: int = 0):
    return build_model(config_for("tiny", num_hidden_layers=layers), CPU, torch.float32, seed)


def linear(k: int, n: int, bias: bool, dtype=torch.float32, seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    lin = nn.Linear(k, n, bias=bias, dtype=dtype)
    with torch.no_grad():
        lin.weight.normal_(0, 0.05)
        if bias:
            lin.bias.normal_(0, 1.0)
    return lin.requires_grad_(False)


def reference(lin: nn.Linear, x: torch.Tensor, w_kn: torch.Tensor) -> torch.Tensor:
    y = x.float() @ w_kn
    return y if lin.bias is None else y + lin.bias.float()


# ------------------------------------------------------------------ QuantLinear


@pytest.mark.parametrize("group", [32, 128, "channel"])
@pytest.mark.parametrize("bias", [False, True])
def test_quant_linear_int4_equals_dequantized_reference(group, bias):
    k, n = 256, 96
    lin = linear(k, n, bias)
    spec = parse_quant(f"int4-g{group}" if isinstance(group, int) else "int4-channel")
    q = QuantLinear.from_linear(lin, "torch", spec)
    g = k if group == "channel" else group
    packed, scales = formats.quantize_int4(lin.weight.t().contiguous(), g, torch.float32)
    w_kn = formats.dequantize_int4(packed, scales, g)
    # The [N, K] -> [K, N] transpose is right: the dequantized weight is near W^T.
    assert rel(w_kn, lin.weight.t()) < 0.15
    for lead in LEADING:
        x = torch.randn(*lead, k)
        y = q(x)
        assert y.shape == (*lead, n) and y.dtype == x.dtype
        if x.numel():
            assert rel(y, reference(lin, x, w_kn)) < 1e-5
    assert q.weight_nbytes() == k * n // 2 + (k // g) * n * 4 + (n * 4 if bias else 0)


@pytest.mark.parametrize("bias", [False, True])
def test_quant_linear_nvfp4_equals_dequantized_reference(bias):
    k, n = 160, 40
    lin = linear(k, n, bias, seed=1)
    q = QuantLinear.from_linear(lin, "torch", "nvfp4")
    w_kn = formats.dequantize_nvfp4(*formats.quantize_nvfp4(lin.weight.t().contiguous()))
    assert rel(w_kn, lin.weight.t()) < 0.2
    for lead in LEADING:
        x = torch.randn(*lead, k)
        y = q(x)
        assert y.shape == (*lead, n)
        if x.numel():
            assert rel(y, reference(lin, x, w_kn)) < 1e-5


def test_quant_linear_fp16_within_operator_tolerance():
    lin = linear(256, 64, True, dtype=torch.float16, seed=2)
    q = QuantLinear.from_linear(lin, "torch", "int4-g64")
    packed, scales = formats.quantize_int4(lin.weight.t().contiguous(), 64, torch.float16)
    x = torch.randn(3, 4, 256, dtype=torch.float16)
    y = q(x)
    assert y.dtype == torch.float16
    assert rel(y, reference(lin, x, formats.dequantize_int4(packed, scales, 64))) < 3e-3


def test_parse_quant():
    assert parse_quant("int4-g128") == ql.QuantSpec("int4-g128", "int4_gemm", 128)
    assert parse_quant("INT4-channel").group_size == "channel"
    assert parse_quant("nvfp4").op == "nvfp4_gemm"
    for bad in ("int4-g7", "int4-g0", "int8", "int4-gx"):
        with pytest.raises(InputError):
            parse_quant(bad)
    with pytest.raises(InputError):
        ql.check_backend("no_such_backend")


# ----------------------------------------------------------------- quantize_model


def expected_names(layers: int) -> set[str]:
    attn = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(layers) for p in "qkvo"]
    mlp = [f"model.layers.{i}.mlp.{p}_proj" for i in range(layers) for p in ("gate", "up", "down")]
    return set(attn + mlp)


@pytest.mark.parametrize("lm_head", [False, True])
def test_quantize_model_swaps_exactly_the_decoder_linears(lm_head):
    model = tiny(layers=3)
    ids = torch.randint(0, 1024, (2, 9))
    before = quality.full_logits(model, ids)
    dense_linear = ql.linear_nbytes(model, lm_head)
    swapped = quantize_model(model, "torch", "int4-g128", lm_head=lm_head)
    want = expected_names(3) | ({"lm_head"} if lm_head else set())
    assert set(swapped) == want and len(swapped) == len(want)
    quant = {n for n, m in model.named_modules() if isinstance(m, QuantLinear)}
    assert quant == want
    assert isinstance(model.lm_head, QuantLinear) == lm_head
    assert isinstance(model.model.embed_tokens, nn.Embedding)
    assert not any(isinstance(m, nn.Linear) for n, m in model.named_modules() if n in want)
    # Same model, quantized: close to the original logits but not equal.
    after = quality.full_logits(model, ids)
    assert 0 < rel(after, before) < 0.6
    # int4 with fp32 scales per 128 rows: K*N/2 + K/128*N*4 bytes per layer, vs K*N*4 dense.
    c = model.config
    shapes = [(c.hidden_size, c.num_attention_heads * c.head_dim), (c.hidden_size, c.num_key_value_heads * c.head_dim),
              (c.hidden_size, c.num_key_value_heads * c.head_dim), (c.num_attention_heads * c.head_dim, c.hidden_size),
              (c.hidden_size, c.intermediate_size), (c.hidden_size, c.intermediate_size),
              (c.intermediate_size, c.hidden_size)] * c.num_hidden_layers
    shapes += [(c.hidden_size, c.vocab_size)] if lm_head else []
    assert dense_linear == sum(k * n * 4 for k, n in shapes)
    assert ql.linear_nbytes(model, lm_head) == sum(k * n // 2 + k // 128 * n * 4 for k, n in shapes)


def test_quantized_tied_lm_head_keeps_embedding():
    model = build_model(config_for("tiny", tie_word_embeddings=True), CPU, torch.float32)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    quantize_model(model, "torch", "int4-channel", lm_head=True)
    assert isinstance(model.lm_head, QuantLinear)
    assert model.model.embed_tokens.weight.shape == (1024, 256)


# ------------------------------------------------------------------ decode step


def test_static_cache_decode_step_matches_full_forward_and_rewinds():
    import inspect
    import warnings

    model = tiny()
    ids = torch.randint(0, 1024, (3, 12))
    full = quality.full_logits(model, ids)
    cache = decode.static_cache(model, 16)
    # transformers 5.24 renamed the forward's past_key_values to cache (a FutureWarning a call; removed in
    # 5.40): the keyword the installed version takes, and no warning
    (kw,) = decode.cache_kwargs(model, cache)
    assert kw in inspect.signature(model.forward).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        last = decode.prefill(model, cache, ids[:, :8])
        step = decode.DecodeStep(model, cache, 3, CPU)
        for t in range(8, 12):
            step.tok.copy_(ids[:, t:t + 1])
            assert rel(step()[:, -1], full[:, t]) < 1e-4
    assert rel(last[:, -1], full[:, 7]) < 1e-5
    decode.rewind(cache, 10)  # the timing loop rewinds the cache between phases
    step.tok.copy_(ids[:, 10:11])
    assert rel(step()[:, -1], full[:, 10]) < 1e-4


def test_time_decode_on_cpu_is_wall_clock():
    t = decode.time_decode(tiny(), batch=2, prompt_len=4, steps=3, device=CPU, mode="graph")
    assert t.mode == "cpu-wall" and len(t.samples_ms) == 3 and all(s > 0 for s in t.samples_ms)
    assert t.check_rel_err is None
    p = decode.time_prefill(tiny(), prompt_len=5, device=CPU, reps=2)
    assert p.mode == "cpu-wall" and len(p.samples_ms) == 2 and p.p50 > 0


@pytest.mark.parametrize("ways, says, not_says", [(["sdpa"], "the whole static K/V cache", "up to each token"),
                                                  (["triton", "flex"], "up to each token", "whole static"),
                                                  (["sdpa", "triton"], "with sdpa the whole", "")])
def test_report_says_what_of_the_cache_a_step_reads(ways, says, not_says):
    from qgemm_bench.model import outputs

    rows = [outputs.ModelRow(model="tiny", backend="torch", quant="int4-g64", batch=1, dtype="float16", device="cpu",
                             timing="cpu-wall", status="ok", step_read_gib=1.0, attention=a) for a in ways]
    line = outputs.kv_read(rows)
    assert says in line and (not not_says or not_says not in line)


@pytest.mark.parametrize("modes, timing, says", [
    ([None, None], "graph", "launched op by op"), ([None], "cpu-wall", "on the wall clock"),
    (["graph", "graph"], "graph", "replayed from a CUDA graph"),
    (["graph", "eager (capture failed: X)"], "graph", "where captured"),
    (["eager (capture failed: X)"], "graph", "launched op by op (the CUDA graph capture failed"),
    (["graph", "graph, not reported: its replay differs"], "graph", "where captured and checked"),
    (["cpu-wall"], "cpu-wall", "on the wall clock")])
def test_report_says_how_the_prefill_was_timed(modes, timing, says):
    """Rows from before prefill_timing (None) were eager on CUDA and on the
    wall clock on CPU; captures that failed or replays that were dropped
    make the report point at the rows."""
    from qgemm_bench.model import outputs

    rows = [outputs.ModelRow(model="tiny", backend="torch", quant="int4-g64", batch=1, dtype="float16", device="cpu",
                             timing=timing, status="ok", prefill_len=8, prefill_tokens_per_s=1.0, prefill_timing=m)
            for m in modes]
    assert says in outputs.prefill_how(rows)


# ------------------------------------------------------------------- quality


def independent_nll(model, ids: torch.Tensor, begin: int, t: int) -> float:
    """-log p(ids[t] | ids[begin:t]) from one forward pass."""
    logits = model(input_ids=ids[begin:t][None]).logits[0, -1].double()
    return -(logits[ids[t]] - torch.logsumexp(logits, -1)).item()


def test_perplexity_equals_independent_exp_mean_nll():
    model = tiny()
    ids = torch.randint(0, 1024, (40,))
    # One window over everything: exp of the usual shifted cross-entropy.
    with torch.no_grad():
        ce = F.cross_entropy(model(input_ids=ids[None]).logits[0, :-1].double(), ids[1:]).item()
    one = quality.perplexity(model, ids, window=64)
    assert one["tokens"] == 39 and one["perplexity"] == pytest.approx(math.exp(ce), rel=1e-5)
    # Disjoint chunks of 16: each chunk's first token is context only.
    chunked = quality.perplexity(model, ids, window=16)
    with torch.no_grad():
        nll = [independent_nll(model, ids, b, t) for b in (0, 16, 32) for t in range(b + 1, min(b + 16, 40))]
    assert chunked["tokens"] == len(nll) == 37
    assert chunked["perplexity"] == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-5)
    # Sliding windows, stride 1: token t sees the window-1 tokens before it.
    sliding = quality.perplexity(model, ids, window=8, stride=1)
    with torch.no_grad():
        nll = [independent_nll(model, ids, max(0, t - 7), t) for t in range(1, 40)]
    assert sliding["tokens"] == 39
    assert sliding["perplexity"] == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-5)
    assert sliding["perplexity"] != pytest.approx(chunked["perplexity"], rel=1e-6)


def test_logit_metrics():
    ref = torch.randn(2, 5, 11)
    same = quality.logit_metrics(ref, ref.clone())
    assert same == {"logits_rel_err": 0.0, "logits_kl": 0.0, "top1_agree": 1.0}
    flipped = quality.logit_metrics(ref, -ref)
    assert flipped["logits_rel_err"] == pytest.approx(2.0)
    assert flipped["top1_agree"] == 0.0 and flipped["logits_kl"] > 0.5
    p, q = F.softmax(ref.double(), -1), F.softmax(0.5 * ref.double(), -1)
    kl = (p * (p.log() - q.log())).sum(-1).mean().item()
    assert quality.logit_metrics(ref, 0.5 * ref)["logits_kl"] == pytest.approx(kl, rel=1e-9)


# ------------------------------------------------------------------ end to end


def run_cli(tmp_path, *extra, name="run"):
    out = tmp_path / name
    model = [] if "--checkpoint" in extra else ["--model", "tiny"]  # a checkpoint's config is the model
    argv = [*model, "--device", "cpu", "--output-dir", str(out), "--batch", "1,3", "--prompt-len", "6",
            "--decode-steps", "3", "--quality-tokens", "2x12", *extra]
    return cli.main(argv), out


def test_tiny_run_end_to_end_writes_outputs(tmp_path, monkeypatch):
    real = ql.prepare_kernel

    def flaky(backend, spec, *a, **kw):  # one format unavailable, one failing: both must become rows
        if spec.op == "nvfp4_gemm":
            raise BackendUnavailable("no NVFP4 kernel here")
        if spec.group_size == "channel":
            raise RuntimeError("kernel exploded")
        return real(backend, spec, *a, **kw)

    monkeypatch.setattr(ql, "prepare_kernel", flaky)
    rc, out = run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g64,int4-channel,nvfp4")
    assert rc == 0
    for f in ("rows.jsonl", "results.csv", "results.json", "report.md", "tokens_per_s.png"):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    assert (out / "tokens_per_s.png").read_bytes()[:4] == b"\x89PNG"
    doc = json.loads((out / "results.json").read_text())
    rows = {(r["backend"], r["quant"], r["batch"]): r for r in doc["rows"]}
    assert set(rows) == {(b, q, n) for b, q in [("bf16", "none"), ("torch", "int4-g64"), ("torch", "int4-channel"),
                                                 ("torch", "nvfp4")] for n in (1, 3)}
    assert len((out / "rows.jsonl").read_text().splitlines()) == 8
    for n in (1, 3):
        ref, q = rows[("bf16", "none", n)], rows[("torch", "int4-g64", n)]
        assert ref["status"] == q["status"] == "ok"
        assert ref["timing"] == "cpu-wall" and ref["tokens_per_s"] == pytest.approx(n * 1e3 / ref["step_ms_p50"])
        assert ref["logits_rel_err"] == 0 and ref["top1_agree"] == 1 and ref["weight_ratio"] == 1
        assert 0 < q["logits_rel_err"] < 0.6 and q["logits_kl"] > 0 and 0 < q["top1_agree"] <= 1
        assert q["speedup"] == pytest.approx(q["tokens_per_s"] / ref["tokens_per_s"])
        # int4 + fp32 scales per 64 rows vs fp32: 1/8 + 1/64 of the linear bytes.
        assert q["linear_weight_ratio"] == pytest.approx(1 / 8 + 1 / 64, rel=1e-6)
        assert q["weight_ratio"] < 0.5 and q["prefill_tokens_per_s"] > 0
        for r in (ref, q):  # issue 54's columns: bytes per step x steps/s, the step split, no compile
            assert r["effective_gbps"] == pytest.approx(r["step_read_gib"] * 2**30 / r["step_ms_p50"] / 1e6)
            assert r["compile"] == "none" and r["compile_s"] is None and r["attention"] == "sdpa"
            parts = [r[f"split_{c}_ms"] for c in ("quant_gemm", "dense_gemm", "attention", "other")]
            assert sum(parts) == pytest.approx(r["split_total_ms"]) and r["split_attention_ms"] > 0
            assert r["split_source"] == "un-graphed step" and r["split_kernels"] is None  # CPU: no graph, no kernels
        assert q["split_quant_gemm_ms"] > 0 and ref["split_quant_gemm_ms"] == 0
        assert rows[("torch", "nvfp4", n)]["status"] == "unavailable"
        assert rows[("torch", "nvfp4", n)]["reason"] == "no NVFP4 kernel here"
        assert rows[("torch", "int4-channel", n)]["status"] == "error"
        assert "kernel exploded" in rows[("torch", "int4-channel", n)]["reason"]
    assert "kernel exploded" in (out / "errors.log").read_text()
    assert doc["metadata"]["model"]["layers"] == 2 and doc["metadata"]["settings"]["batches"] == [1, 3]
    assert doc["metadata"]["model"]["fused_projections"] is True  # model/fuse.py: every variant, by default
    assert doc["metadata"]["torch"] == torch.__version__ and "transformers" in doc["metadata"]
    assert doc["metadata"]["settings"]["stall_timeout_s"] == 0.0  # the sweep's default: off on CPU
    assert doc["metadata"]["interrupted"] is False and doc["metadata"]["stopped"] == ""
    assert doc["metadata"]["store"]["helion"] == {"note": "the interpreter: no GPU's configs"}
    assert doc["metadata"]["settings"]["argv"][:2] == ["--model", "tiny"]  # main(argv)'s, not pytest's
    report = (out / "report.md").read_text()
    assert "torch int4-g64" in report and "tokens_per_s.png" in report and "kernel exploded" in report
    assert "int4-channel" in report and "unavailable" in report
    assert "Effective bandwidth" in report and "numerical fidelity only" in report
    assert "Split: one step as timed under torch.profiler, CPU operator time" in report


@pytest.mark.parametrize("bad", [["--model", "llama-9z"], ["--batch", "1,x"], ["--batch", "0"],
                                 ["--backends", "bf16,nope"], ["--quant", "int4-g96"], ["--quant", "fp8"],
                                 ["--eval-text", "x.txt"], ["--quality-tokens", "2"],
                                 ["--attention", "flex"], ["--decode-mode", "graph"],
                                 ["--quant", "int4-g128,,nvfp4"], ["--backends", "bf16,,torch"], ["--batch", "1,,4"],
                                 ["--batch", "1,4,1"],
                                 ["--inductor-config", "combo_kernels=True"],
                                 ["--compile", "default", "--inductor-config", "no_such_key=1"],
                                 ["--compile", "default", "--inductor-config", "combo_kernels=3"],
                                 ["--compile", "default", "--inductor-config", "combo_kernels"],
                                 ["--compile", "default", "--inductor-config", ","],
                                 ["--fused-norms", "--unfused"], ["--swiglu-prologue", "--unfused"]])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, bad):
    rc, out = run_cli(tmp_path, *bad)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert not out.exists()


def test_a_prefill_replay_that_differs_is_not_reported(tmp_path, monkeypatch):
    """A prefill graph whose first replay's logits differ from an eager
    prefill's times something else: the variant keeps no prefill number and
    says why (the capture itself needs CUDA: its result is faked here)."""
    real = decode.time_prefill

    def replay_differs(*a, **kw):
        t = real(*a, **kw)
        t.extra["replay_rel_err"] = 1.4
        return t

    monkeypatch.setattr(decode, "time_prefill", replay_differs)
    rc, out = run_cli(tmp_path, "--backends", "bf16")
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert rc == 0 and all(r["prefill_tokens_per_s"] is None for r in rows)
    assert all(r["prefill_timing"].startswith("graph, not reported: its replay differs") for r in rows)
    assert "whose replay differed from an eager prefill: no prefill numbers" in (out / "report.md").read_text()


@pytest.mark.parametrize("interpret, extra, says", [("0", [], "TRITON_INTERPRET=1"),
                                                    ("1", ["--dtype", "bfloat16"], "no bfloat16")])
def test_triton_attention_on_cpu_needs_the_interpreter_without_bfloat16(tmp_path, capsys, monkeypatch, interpret,
                                                                         extra, says):
    """With the interpreter turned off it cannot run (unset, a CPU run sets
    it); in bfloat16 the interpreter computes it wrong (the rows came out
    incorrect, rel err ~1.5): refused."""
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    rc, out = run_cli(tmp_path, "--attention", "triton", *extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and says in err[0] and not out.exists()


@pytest.mark.parametrize("extra", [["--fused-rope"], ["--fused-rope", "--attention", "sdpa"]])
def test_fused_rope_without_triton_attention_is_refused(tmp_path, capsys, extra):
    """--fused-rope is the triton attention kernel's: elsewhere one line, exit 2."""
    rc, out = run_cli(tmp_path, *extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--fused-rope is --attention triton's" in err[0] and not out.exists()


def test_a_model_larger_than_the_device_is_refused_before_it_is_built(tmp_path, capsys):
    """The README's 8B example on a 24-GiB CPU machine built the float32
    model (~32 GiB) until it failed, once per variant and batch size. A
    preset whose weights exceed the device's memory is one line, exit 2;
    the weight count is Llama-3-8B's published 8.03 B parameters."""
    from qgemm_bench.harness.capacity import total_bytes

    assert llama.weight_bytes(config_for("llama-3-8b"), torch.bfloat16) == 2 * 8_030_261_248
    assert llama.weight_bytes(config_for("llama-3-70b"), torch.bfloat16, world=2) < \
        llama.weight_bytes(config_for("llama-3-70b"), torch.bfloat16) / 1.9
    assert llama.weight_bytes(config_for("llama-3-70b"), torch.float32) > total_bytes(CPU)  # any CI machine
    out = tmp_path / "run"
    rc = cli.main(["--model", "llama-3-70b", "--device", "cpu", "--output-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--model llama-3-70b in float32: its weights alone take about" in err[0]
    assert "--dtype float16" in err[0] and not out.exists()


def test_a_float32_model_with_our_kernels_says_to_run_float16(capsys):
    """--model on CPU runs float32 by default, where our kernels' rows are
    unavailable (they take float16 or bfloat16): the plan says so up front,
    once, and not where no such backend runs or --dtype float16 is given."""
    from qgemm_bench import cli as runner

    def note(*extra):
        args = runner.parser().parse_args(["--model", "tiny", "--device", "cpu", "--quant", "int4-g64", *extra])
        cli.build_plan(args)
        return [line for line in capsys.readouterr().err.splitlines() if "float32" in line]

    got = note("--backends", "torch,triton,helion")
    assert len(got) == 1 and "triton, helion take float16" in got[0] and "--dtype float16" in got[0]
    assert note("--backends", "torch") == [] and note("--backends", "triton", "--dtype", "float16") == []


def test_our_kernels_rows_in_a_float32_model_are_unavailable_with_the_fix(tmp_path, monkeypatch):
    """Not an error row with a ValueError in errors.log (a newcomer's
    `--model tiny --backends triton` on CPU): unavailable, saying why (the
    plan's note names --dtype float16). And with TRITON_INTERPRET unset a
    machine without CUDA turns the interpreter on, as the sweep does."""
    import json
    import os

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rc, out = run_cli(tmp_path, "--backends", "triton", "--quant", "int4-g32", "--batch", "1", "--no-step-split")
    rows = [r for r in json.loads((out / "results.json").read_text())["rows"] if r["backend"] == "triton"]
    assert rc == 0 and rows and all(r["status"] == "unavailable" for r in rows)
    assert all("float16 or bfloat16 activations, not float32" in r["reason"] for r in rows)
    assert os.environ.get("TRITON_INTERPRET") == (None if torch.cuda.is_available() else "1")


@pytest.mark.parametrize("extra, world, on", [([], None, True), (["--fused-norms"], None, True),
                                              (["--no-fused-norms"], None, False), (["--unfused"], None, False),
                                              ([], (0, 2, 0), False)])
def test_fused_norms_are_on_unless_turned_off_unfused_or_sharded(extra, world, on):
    """--fused-norms is the default; --no-fused-norms turns it off, and
    --unfused (whose GEMMs cannot take the norms) or a torchrun world (the
    all-reduce sits between the GEMM and its residual add) quietly."""
    from qgemm_bench import cli as runner
    from qgemm_bench.harness.distributed import World

    args = runner.parser().parse_args(["--model", "tiny", "--device", "cpu", "--quant", "int4-g64",
                                       "--backends", "torch", *extra])
    assert cli.build_plan(args, world and World(*world)).fused_norms is on


def make_checkpoint(tmp_path):
    """A tiny Llama saved as an HF checkpoint with a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    text = " ".join(f"w{i % 37} w{(i * 7) % 53}." for i in range(200))
    vocab = {"<unk>": 0, "<s>": 1}
    for w in text.replace(".", " .").split():
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>")
    ckpt = tmp_path / "ckpt"
    tiny(seed=3).save_pretrained(ckpt)
    fast.save_pretrained(ckpt)
    (tmp_path / "text.txt").write_text(text)
    return ckpt, tmp_path / "text.txt", fast


def test_checkpoint_run_reports_perplexity(tmp_path):
    ckpt, text, tok = make_checkpoint(tmp_path)
    rc, out = run_cli(tmp_path, "--checkpoint", str(ckpt), "--eval-text", str(text),
                      "--eval-window", "64", "--eval-tokens", "300", "--backends", "bf16,torch",
                      "--quant", "int4-g32", "--batch", "1")
    assert rc == 0
    doc = json.loads((out / "results.json").read_text())
    rows = {r["backend"]: r for r in doc["rows"]}
    assert doc["metadata"]["model"]["trained"] and doc["metadata"]["settings"]["eval_tokens"] == 300
    # The run's unquantized perplexity is that of the checkpoint on the same tokens.
    model = build_model(config_for("tiny"), CPU, torch.float32, seed=3)
    ids = quality.text_tokens(tok, text, 300)
    assert rows["bf16"]["perplexity"] == pytest.approx(quality.perplexity(model, ids, 64)["perplexity"], rel=1e-4)
    assert rows["torch"]["status"] == "ok" and math.isfinite(rows["torch"]["perplexity"])
    assert rows["torch"]["perplexity"] != pytest.approx(rows["bf16"]["perplexity"], rel=1e-6)


def test_a_killed_model_run_is_rebuilt_by_report(tmp_path, capsys):
    # kill -9 leaves rows.jsonl and the metadata.json written when the run
    # started (here: the finished run's outputs removed, and a cut-off line
    # appended as a kill mid-write would leave): `runner.py report DIR`
    # rebuilds the model bench's outputs from them, marked as killed.
    import runner

    rc, out = run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g64", "--no-plots")
    assert rc == 0
    whole = json.loads((out / "results.json").read_text())
    start = json.loads((out / "metadata.json").read_text())
    assert start["model"] == whole["metadata"]["model"] and "stopped" not in start
    for name in ("results.json", "results.csv", "report.md"):
        (out / name).unlink()
    rows = (out / "rows.jsonl").read_text().splitlines()
    (out / "rows.jsonl").write_text("\n".join(rows[:3]) + "\n" + rows[3][:40])
    capsys.readouterr()
    assert runner.main(["report", str(out), "--no-plots"]) == 0
    captured = capsys.readouterr()
    cut = "rows.jsonl: line 4 was cut off mid-row"
    assert f"note: {cut}" in captured.err and f"rebuilt: {out}" in captured.out
    doc = json.loads((out / "results.json").read_text())
    assert doc["rows"] == whole["rows"][:3]
    meta = doc["metadata"]
    assert meta["interrupted"] is True and meta["rebuilt_from"] == "rows.jsonl"
    assert meta["stopped"] == "killed during the run (3 of 4 rows measured; rebuilt from rows.jsonl)"
    report = (out / "report.md").read_text()
    assert (out / "results.csv").is_file() and "Stopped early: killed during the run" in report
    assert f"**Rebuilt from rows.jsonl: {cut}" in report  # named, never dropped silently
    # A finished run rebuilds as it was (not marked killed); a row that is not one is one line.
    rc, again = run_cli(tmp_path, "--backends", "bf16", "--no-plots", name="again")
    assert runner.main(["report", str(again), "--no-plots"]) == 0
    assert json.loads((again / "results.json").read_text())["metadata"].get("stopped") == ""
    (again / "rows.jsonl").write_text('{"backend": "bf16", "bogus": 1}\n')
    capsys.readouterr()
    assert runner.main(["report", str(again)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 1: not a model benchmark row" in err[0]


@pytest.mark.parametrize("signal,code,word", [(KeyboardInterrupt, 130, "interrupted (Ctrl-C)"),
                                              (signals.Terminated, 143, "terminated (SIGTERM)")])
def test_interrupt_keeps_what_was_measured(tmp_path, monkeypatch, capsys, signal, code, word):
    # Ctrl-C, or SIGTERM (raised as signals.Terminated), mid-decode: the rows
    # measured are kept, the outputs written, the exit status the sweep's.
    real = decode.time_decode

    def interrupted(model, batch, *a, **kw):
        if batch == 3 and isinstance(model.model.layers[0].mlp.down_proj, QuantLinear):
            raise signal
        return real(model, batch, *a, **kw)

    monkeypatch.setattr(decode, "time_decode", interrupted)
    rc, out = run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g128,nvfp4")
    assert rc == code
    assert f"{word}: 3 row(s) kept" in capsys.readouterr().err
    doc = json.loads((out / "results.json").read_text())
    assert doc["metadata"]["interrupted"] is True and doc["metadata"]["stopped"] == word
    got = [(r["backend"], r["quant"], r["batch"], r["status"]) for r in doc["rows"]]
    assert got == [("bf16", "none", 1, "ok"), ("bf16", "none", 3, "ok"), ("torch", "int4-g128", 1, "ok")]
    assert len((out / "rows.jsonl").read_text().splitlines()) == 3


def test_a_run_under_the_watchdog_is_unaffected_and_records_it(tmp_path):
    rc, out = run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g64", "--batch", "1",
                      "--stall-timeout", "60", "--no-plots")
    assert rc == 0
    doc = json.loads((out / "results.json").read_text())
    assert [r["status"] for r in doc["rows"]] == ["ok", "ok"]
    assert doc["metadata"]["settings"]["stall_timeout_s"] == 60.0 and doc["metadata"]["stopped"] == ""


def test_a_stall_in_a_variant_step_makes_its_rows_errors_and_skips_the_rest(tmp_path, monkeypatch, capsys):
    """Which steps are watched, and what a stall before decoding (here in
    quantize: the backend's prepare) writes. The watchdog fires at once for
    that step, in this thread; the real one's timer and os._exit are
    tests/test_interrupts.py's (in a child process: they would end pytest)."""
    steps = []

    class FiresAtQuantize:
        def __init__(self, seconds, on_stall):
            self.on_stall = on_stall

        @contextmanager
        def step(self, label):
            steps.append(label.what)
            if label.what == "torch int4-g64 quantize":
                raise SystemExit(self.on_stall(label))  # the real one: os._exit(on_stall(label))
            yield

    monkeypatch.setattr(bench, "Watchdog", FiresAtQuantize)
    with pytest.raises(SystemExit) as stop:
        run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g64,nvfp4", "--stall-timeout", "5",
                "--no-plots")
    assert stop.value.code == 1
    assert steps == ["bf16 load", "bf16 quality", "bf16 prefill", "bf16 decode at batch 1", "bf16 decode at batch 3",
                     "torch int4-g64 load", "torch int4-g64 quantize"]
    why = "torch int4-g64 quantize did not finish in 5 s (--stall-timeout; "
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and err[0].startswith(f"error: the run stopped early: {why}"), err
    assert err[0].endswith("; 2 row(s) not run")
    out = tmp_path / "run"
    doc = json.loads((out / "results.json").read_text())
    got = [(r["backend"], r["quant"], r["batch"], r["status"]) for r in doc["rows"]]
    assert got == [("bf16", "none", 1, "ok"), ("bf16", "none", 3, "ok"), ("torch", "int4-g64", 1, "error"),
                   ("torch", "int4-g64", 3, "error"), ("torch", "nvfp4", 1, "skipped"),
                   ("torch", "nvfp4", 3, "skipped")]
    assert all(r["reason"].startswith(why) for r in doc["rows"][2:4])
    assert {r["reason"] for r in doc["rows"][4:]} == {"not run: torch int4-g64 quantize stalled"}
    assert doc["metadata"]["stopped"].startswith(why) and doc["metadata"]["settings"]["stall_timeout_s"] == 5.0
    assert len((out / "rows.jsonl").read_text().splitlines()) == 6
    assert (out / "results.csv").is_file() and "Stopped early" in (out / "report.md").read_text()


def test_without_transformers_the_model_bench_is_one_line(monkeypatch, capsys, tmp_path):
    import sys

    from qgemm_bench.cli import main

    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    code = main(["--model", "tiny", "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ['error: --model/--checkpoint need transformers: pip install -e ".[model]"']
    assert not (tmp_path / "run").exists()


def test_eval_text_reads_a_bz2_wikipedia_dump(tmp_path, monkeypatch):
    """A .bz2 --eval-text is a MediaWiki XML dump (as in gensim's test data):
    its articles' text without markup; without gensim, one clear line."""
    import bz2
    import sys

    xml = ("<mediawiki xmlns='http://www.mediawiki.org/xml/export-0.10/'>"
           "<siteinfo><namespaces><namespace key='0' /></namespaces></siteinfo>"
           "<page><title>Alpha</title><ns>0</ns><id>1</id><revision><text>'''Alpha''' is a "
           "[[Greek alphabet|letter]].</text></revision></page>"
           "<page><title>Beta</title><ns>0</ns><id>2</id><revision><text>Beta follows {{cite|x}} alpha.</text>"
           "</revision></page></mediawiki>")
    dump = tmp_path / "wiki.xml.bz2"
    dump.write_bytes(bz2.compress(xml.encode()))

    class Chars:  # a tokenizer that returns code points, so the text itself is checked
        def __call__(self, text, return_tensors=None):
            return type("Enc", (), {"input_ids": torch.tensor([[ord(c) for c in text]])})()

    if __import__("importlib").util.find_spec("gensim") is not None:
        text = "".join(map(chr, quality.text_tokens(Chars(), dump).tolist()))
        assert "Alpha is a letter." in text and "Beta follows" in text
        assert "[[" not in text and "'''" not in text and "{{" not in text
    monkeypatch.setitem(sys.modules, "gensim", None)
    monkeypatch.setitem(sys.modules, "gensim.corpora.wikicorpus", None)
    with pytest.raises(InputError, match="needs gensim"):
        quality.text_tokens(Chars(), dump)


def test_unfused_runs_the_checkpoints_projections_and_measures_the_same_model(tmp_path):
    """--unfused: q, k, v, gate and up as five GEMMs; int4 quantizes them to the
    same codes as the fused ones, so the quality columns agree."""
    runs = {}
    for name, extra in (("fused", []), ("unfused", ["--unfused"])):
        rc, out = run_cli(tmp_path, "--backends", "bf16,torch", "--quant", "int4-g64", *extra, name=name)
        assert rc == 0
        runs[name] = json.loads((out / "results.json").read_text())
    assert runs["fused"]["metadata"]["model"]["fused_projections"] is True
    assert runs["unfused"]["metadata"]["model"]["fused_projections"] is False
    q = {k: next(r for r in d["rows"] if r["backend"] == "torch" and r["batch"] == 1) for k, d in runs.items()}
    assert q["fused"]["logits_rel_err"] == pytest.approx(q["unfused"]["logits_rel_err"], rel=1e-4)
    assert q["fused"]["linear_weight_ratio"] == pytest.approx(q["unfused"]["linear_weight_ratio"])


@pytest.mark.parametrize("over, cache", [({}, False), ({"combo_kernels": False}, None),
                                         ({"fx_graph_cache": True}, True)])
def test_inductor_settings_turn_the_fx_cache_off_with_both_reductions_and_combos(over, cache):
    """multi_kernel and combo_kernels on together: compiled afresh (a cached
    graph with both failed to load on the H200); one off, or the cache asked
    for, leaves it to Inductor / the override."""
    got = decode.inductor_settings(over)
    assert got.get("fx_graph_cache") is cache and got["triton.multi_kernel"] == decode.MULTI_KERNEL


@pytest.mark.parametrize("settings, says, not_says", [
    ({"multi_kernel": 1, "combo_kernels": True, "fx_graph_cache": False, "inductor_config": {}},
     "Inductor's reductions by multi_kernel; independent kernels launched as one by combo_kernels; compiled "
     "afresh (Inductor's FX graph cache off)", "Inductor config"),
    ({"multi_kernel": 0, "combo_kernels": False, "inductor_config": {"triton.multi_kernel": 0, "combo_kernels": False}},
     "Inductor config triton.multi_kernel=0, combo_kernels=False", "by multi_kernel")])
def test_report_names_the_compiled_steps_inductor_settings(settings, says, not_says):
    from qgemm_bench.model import outputs

    meta = {"settings": {"compile": "default", "timing": "graph", **settings}, "model": {"model": "tiny"}}
    line = next(t for t in outputs.markdown([], meta, []).splitlines() if t.startswith("Decode:"))
    assert says in line and not_says not in line


def test_a_cpu_model_run_times_on_one_thread_and_gives_the_count_back(tmp_path, monkeypatch):
    """As the sweep (tests/test_cli.py): one intra-op thread while it
    measures, recorded in the metadata, the caller's count after."""
    import json

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rc, out = run_cli(tmp_path, "--backends", "bf16", "--batch", "1", "--no-step-split")
        assert rc == 0 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert json.loads((out / "metadata.json").read_text())["torch_threads"] == 1
