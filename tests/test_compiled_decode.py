"""The compiled decode step on CPU (issue 54): torch.compile(fullgraph=True)
of a whole step of a tiny random Llama with fp32 and int4 layers (the int4
GEMM through the custom op qgemm::linear) gives the eager model's logits;
the op's fake implementation; the GQA-packed decode attention against
transformers' own; the bytes a step reads against a hand count; the step
split's categories. One compile in this file (about 10 s on 2 cores)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from torch.autograd import DeviceType  # noqa: E402
from torch.autograd.profiler_util import Kernel  # noqa: E402

from qgemm_bench.model import bench, decode, ops, profile, rope_attention  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import QuantLinear, parse_quant  # noqa: E402
from tests.support import free_port, one_thread, rel  # noqa: E402, F401 (one_thread autouse: the tiny model on one thread)

CPU = torch.device("cpu")
SEED = 54
# The brief's tiny config: hidden 64, 2 layers; 4 query heads over 2 KV heads (GQA), K = 64 or 128.
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256)


def mixed_model(seed: int = SEED):
    """Layer 0 stays fp32 nn.Linear (the bf16 variant's path on CPU), layer 1 is
    int4 g32 through the torch backend's kernel (the quantized path): one
    compile covers both."""
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, seed)
    spec = parse_quant("int4-g32")
    layer = model.model.layers[1]
    for parent, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                          (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
        for n in names:
            setattr(parent, n, QuantLinear.from_linear(getattr(parent, n), "torch", spec))
    return model


def eager_steps(model, cache, ids, steps: int):
    """The reference: transformers' eager attention, uncompiled, prefill of
    `ids` then `steps` greedy steps; (the first decoded token, each step's
    logits)."""
    model.set_attn_implementation("eager")
    first = decode.prefill(model, cache, ids)[:, -1:].argmax(-1)
    step = decode.DecodeStep(model, cache, ids.shape[0], CPU)
    step.tok.copy_(first)
    ref = []
    for _ in range(steps):
        ref.append(step().clone())
        step.feed_greedy(ref[-1])
    return first, ref


def compiled_steps_match(model, cache, prompt: int, first, ref, attention: str = "sdpa"):
    """Under test: our decode attention and the whole step compiled with
    fullgraph=True (a graph break would raise), from the reference's cache
    state after the prompt: each step's logits the reference's shape and
    within 1e-5 of them. The compiled step, for more checks."""
    decode.use_decode_attention(model, attention)
    decode.rewind(cache, prompt)
    step = decode.DecodeStep(model, cache, first.shape[0], CPU, compile="default")
    step.tok.copy_(first)
    for i, want in enumerate(ref):
        out = step()
        assert out.shape == want.shape and rel(out, want) < 1e-5, (i, rel(out, want))
        step.feed_greedy(out)
    return step


@torch.no_grad()
def test_compiled_step_fullgraph_equals_eager_transformers_step():
    """Reference: transformers' eager attention (repeat_kv), uncompiled. Under
    test: our decode attention and the whole step compiled with fullgraph=True
    (a graph break would raise), over 4 greedy steps from the same cache."""
    torch.manual_seed(SEED)
    model = mixed_model()
    batch, prompt, steps = 3, 7, 4
    cache = decode.static_cache(model, prompt + steps + 1)
    ids = decode.random_tokens(TINY["vocab_size"], batch, prompt, SEED, CPU)
    first, ref = eager_steps(model, cache, ids, steps)
    assert all(r.shape == (batch, 1, TINY["vocab_size"]) for r in ref)
    try:
        step = compiled_steps_match(model, cache, prompt, first, ref)
        assert step.compile_s > 0 and hasattr(step.fn, "_torchdynamo_orig_callable")  # a compiled callable
        assert int(cache.layers[0].cumulative_length) == prompt + steps  # the compiled step advanced the cache
        # The same compiled step under the profiler: quantized GEMMs, dense GEMMs (layer 0, lm_head) and
        # attention all show (not all "rest"), and the categories sum to the step. Their share is not
        # asserted: on CPU the rest holds Dynamo's guard checks and Inductor's wrapper, most of the step,
        # as much as the machine's load makes it.
        split = profile.step_split(step, CPU, reset=lambda: decode.rewind(cache, prompt))
        ms = split.ms
        assert split.source == profile.SOURCES["plain"] and split.kernels is None
        assert ms["quant_gemm"] > 0 and ms["dense_gemm"] > 0 and ms["attention"] > 0, ms
        assert sum(ms[c] for c in profile.CATEGORIES) == pytest.approx(ms["total"], rel=1e-6)
        assert int(cache.layers[0].cumulative_length) == prompt + 3  # reset, one unprofiled step, two profiled
    finally:
        torch._dynamo.reset()


def test_every_op_is_named_for_its_inductor_fallback():
    packets = {n for n in dir(torch.ops.qgemm) if isinstance(getattr(torch.ops.qgemm, n), torch._ops.OpOverloadPacket)}
    assert packets == set(ops.NAMES)


@torch.no_grad()
def test_a_compiled_step_takes_no_implicit_fallback_for_our_ops(monkeypatch):
    """ops.inductor_fallbacks before the compile: Inductor finds each op's
    lowering, never its implicit-fallback branch, whose log line formats the
    call's IR arguments eagerly on torch 2.11 (the SwiGLU prologue's
    uncompilable 8B step). The lowerings taken away first, as in a fresh
    process."""
    import torch._inductor.graph as graph
    from torch._inductor.lowering import lowerings

    for name in ops.NAMES:
        lowerings.pop(getattr(torch.ops.qgemm, name).default, None)
    implicit = []
    real = graph.make_fallback
    monkeypatch.setattr(graph, "make_fallback", lambda op, *a, **kw: (implicit.append(op), real(op, *a, **kw)))
    model = mixed_model()
    cache = decode.static_cache(model, 8)
    decode.prefill(model, cache, decode.random_tokens(TINY["vocab_size"], 1, 3, SEED, CPU))
    try:
        decode.DecodeStep(model, cache, 1, CPU, compile="default")()
    finally:
        torch._dynamo.reset()
    assert not [op for op in implicit if "qgemm" in str(op)]
    assert torch.ops.qgemm.linear.default in lowerings


@torch.no_grad()
@pytest.mark.parametrize("compile,fused_rope", [("none", True), ("default", True), ("default", False)])
def test_triton_attention_steps_equal_eager_steps(compile, fused_rope, monkeypatch):
    """--attention triton: our split-KV kernel (the interpreter, float32) in
    the uncompiled and the compiled step against transformers' eager
    attention, 3 steps from position 70 over more than one split; the cache
    still holds the reference run's keys past each position. With fused_rope
    the kernel also rotates and writes the token (rope_attention): every
    layer's count must come out as transformers' would. The reference
    step keeps SDPA: the kernel runs in the timed steps only, which are
    checked against it in every mode."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    torch.manual_seed(SEED)
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED + 3)
    batch, prompt, steps = 2, 70, 3
    cache = decode.static_cache(model, 2 * prompt)
    ids = decode.random_tokens(TINY["vocab_size"], batch, prompt, SEED + 3, CPU)
    first, ref = eager_steps(model, cache, ids, steps)
    calls, real = [], kernel.decode_attention
    monkeypatch.setattr(kernel, "decode_attention",
                        lambda *a, **kw: calls.append(kw.get("rope") is not None) or real(*a, **kw))
    splits = []  # 3 splits of the 140 slots in 64-slot steps: the token's slots in the second, merges of two
    monkeypatch.setattr(kernel, "splits_for", lambda *a: splits.append(a) or 3)
    monkeypatch.setattr(kernel, "block_for", lambda *a: 64)
    assert decode.use_decode_attention(model, "triton", fused_rope) == fused_rope
    decode.rewind(cache, prompt)
    decode.spoil(cache, prompt)  # the reference's K/V there: a step that does not write its own must fail
    try:
        step = decode.DecodeStep(model, cache, batch, CPU, compile=compile)
        step.tok.copy_(first)
        for i, want in enumerate(ref):
            out = step()
            assert out.shape == want.shape and rel(out, want) < 1e-5, (i, rel(out, want))
            step.feed_greedy(out)
            assert [int(x.cumulative_length) for x in cache.layers] == [prompt + i + 1] * len(cache.layers)
        n = len(calls)
        assert n >= steps * TINY["num_hidden_layers"] and splits and set(calls) == {fused_rope}
        assert rope_attention.ran(model) == fused_rope  # the mark survives the compiled graph (a side effect)
        step.reference()
        assert len(calls) == n  # SDPA's
        if compile == "none":  # the timed step is checked against SDPA's also without a graph (CPU: no graph)
            t = decode.time_decode(model, batch, 8, 2, CPU, attention="triton", split=False)
            assert t.extra["attention"] == "triton" and t.check_rel_err is not None and t.check_rel_err < 1e-5
            assert t.extra["fused_rope"]
    finally:
        torch._dynamo.reset()


@torch.no_grad()
def test_compiled_flex_step_equals_eager_step_across_a_kv_block():
    """--attention flex: the compiled step's flex_attention (block mask up to
    the position, mask_mod for the rest) against transformers' eager attention,
    4 steps from position 126 (FLEX_BLOCK 128: the 3rd step opens a second KV
    block). The cache still holds the reference run's keys past each position,
    so a mask that lets them in changes the output."""
    torch.manual_seed(SEED)
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED + 2)
    batch, prompt, steps = 2, 126, 4
    cache = decode.static_cache(model, decode.cache_len(prompt, steps, "flex"))
    assert decode.cache_len(prompt, steps, "flex") == 2 * decode.FLEX_BLOCK
    ids = decode.random_tokens(TINY["vocab_size"], batch, prompt, SEED + 2, CPU)
    first, ref = eager_steps(model, cache, ids, steps)
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code

    counters.clear()
    try:
        _, code = run_and_get_code(compiled_steps_match, model, cache, prompt, first, ref, "flex")
    finally:
        torch._dynamo.reset()
    # One block mask a step (decode.STEP_STATE): one position copy for both layers, and the 4 steps ran
    # one graph (a mask kept past the step would fail the next call's guards and retrace).
    assert "\n".join(code).count("torch.ops.qgemm.last_position.default(") == 1
    assert counters["stats"]["unique_graphs"] == 1


@torch.no_grad()
def test_decode_attention_equals_transformers_eager_attention():
    """The GQA packing alone, eager, against transformers' eager attention on a
    half-filled static cache (the mask hides the stale tail)."""
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED + 1)
    cache = decode.static_cache(model, 16)
    ids = decode.random_tokens(TINY["vocab_size"], 2, 5, SEED + 1, CPU)
    decode.prefill(model, cache, ids)
    step = decode.DecodeStep(model, cache, 2, CPU)
    step.tok.copy_(ids[:, -1:])
    model.set_attn_implementation("eager")
    ref = step().clone()
    decode.rewind(cache, 5)
    decode.use_decode_attention(model)
    assert model.config._attn_implementation == decode.DECODE_ATTENTION
    assert rel(step(), ref) < 1e-5
    decode.rewind(cache, 5)
    wrong = model.model.layers[0].self_attn.num_key_value_groups
    model.model.layers[0].self_attn.num_key_value_groups = 1  # no packing: every query head on KV head h
    with pytest.raises(RuntimeError):  # shapes then disagree: the packing is what makes it run
        step()
    model.model.layers[0].self_attn.num_key_value_groups = wrong


def test_custom_op_fake_shape_and_opcheck():
    lin = torch.nn.Linear(64, 48, bias=False)
    q = QuantLinear.from_linear(lin.requires_grad_(False), "torch", "int4-g32")
    x = torch.randn(5, 64)
    y = torch.ops.qgemm.linear(x, q.handle, 48)
    assert y.shape == (5, 48) and y.dtype == x.dtype
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode, xh = FakeTensorMode(), x.half()
    with mode:
        fy = torch.ops.qgemm.linear(mode.from_tensor(xh), mode.from_tensor(q.handle), 48)
    assert fy.shape == (5, 48) and fy.dtype == torch.float16
    torch.library.opcheck(torch.ops.qgemm.linear.default, (x, q.handle, 48),
                          test_utils=("test_schema", "test_faketensor"))
    h = q.handle
    assert ops.registered(h) and h.device.type == "cpu" and h.dtype == torch.int64
    q.to(torch.device("meta"))  # moving the module leaves the handle on the host
    assert q.handle is h
    del q
    import gc

    gc.collect()
    assert not ops.registered(h)  # the kernel (and its weights) go with the module


def test_step_bytes_against_a_hand_count():
    """Llama 'tiny' preset (hidden 256, intermediate 512, 2 layers, 4 heads x 64,
    2 KV heads, vocab 1024, untied), fp32, batch 3, cache of 20 slots."""
    from qgemm_bench.model.quant_linear import quantize_model

    cfg = config_for("tiny")
    model = build_model(cfg, CPU, torch.float32, SEED)
    cache = decode.static_cache(model, 20)
    decode.prefill(model, cache, decode.random_tokens(1024, 3, 4, SEED, CPU))
    h, inter, layers, hd, kvh, vocab, f4 = 256, 512, 2, 64, 2, 1024, 4
    linears = h * 4 * hd + 2 * h * kvh * hd + 4 * hd * h + 3 * h * inter  # q, k+v, o, gate+up+down
    rotary = sum(b.nbytes for b in model.buffers())
    kv = 2 * layers * 3 * kvh * 20 * hd * f4
    by_hand = layers * (linears + 2 * h) * f4 + h * f4 + vocab * h * f4 + 3 * h * f4 + rotary  # + norms, head, rows
    got = profile.step_bytes(model, cache, 3)
    assert got == {"weight_bytes": by_hand, "kv_bytes": kv, "step_bytes": by_hand + kv}
    # int4 g128 with fp32 scales: K*N/2 bytes of codes + K/128*N scales per linear.
    quantize_model(model, "torch", "int4-g128")
    kn = [(h, 4 * hd), (h, kvh * hd), (h, kvh * hd), (4 * hd, h), (h, inter), (h, inter), (inter, h)]
    q = sum(k * n // 2 + k // 128 * n * f4 for k, n in kn)
    assert profile.step_bytes(model, cache, 3)["weight_bytes"] == by_hand - layers * linears * f4 + layers * q
    # Tied embeddings: lm_head reads the whole table, and no rows are counted besides.
    tied = build_model(config_for("tiny", tie_word_embeddings=True), CPU, torch.float32, SEED)
    assert profile.step_bytes(tied, cache, 3)["weight_bytes"] == by_hand - 3 * h * f4
    # Effective bandwidth of a row: bytes / median step.
    t = decode.Timing([2.0, 4.0, 3.0], "cpu-wall", extra={"compile": "none", **got})
    fields = bench.step_fields(t, copy_gbps=1.0)
    assert fields["effective_gbps"] == pytest.approx(got["step_bytes"] / 3e-3 / 1e9)
    assert fields["copy_pct"] == pytest.approx(100 * fields["effective_gbps"])
    assert fields["compile_s"] is None


def ev(name, parent=None, cpu_us=0.0, dev_us=0.0, device=DeviceType.CPU, **kw):
    return SimpleNamespace(name=name, cpu_parent=parent, cpu_time_total=cpu_us, device_time_total=dev_us,
                           device_type=device, is_async=False, **kw)


def test_cpu_split_counts_each_operator_once_by_its_outermost_category():
    step = ev("decode_step", cpu_us=1000.0)
    op = ev("qgemm::linear", step, 300.0)
    inner = ev("aten::mm", op, 200.0)  # the torch backend's matmul inside our op: still ours
    lin = ev("aten::linear", step, 100.0)
    mm = ev("aten::mm", lin, 90.0)
    sdpa = ev("aten::scaled_dot_product_attention", step, 50.0)
    flash = ev("aten::_scaled_dot_product_flash_attention", sdpa, 45.0)
    norm = ev("aten::rms_norm", step, 20.0)
    got = profile.cpu_split([step, op, inner, lin, mm, sdpa, flash, norm])
    assert got == pytest.approx({"quant_gemm": 0.3, "dense_gemm": 0.1, "attention": 0.05, "collective": 0.0,
                                 "other": 0.55, "total": 1.0})


def kernel(name, us, start, op=None, kind="kernel", stream=7):
    """A device event (start in us; on CUDA stream `stream`); the operator
    that launched it lists it as torch does (FunctionEvent.kernels: name,
    device, duration). kind None: torch 2.11's events, which have no
    activity_type."""
    if op is not None:
        op.kernels.append(Kernel(name, 0, us))
    extra = {} if kind is None else {"activity_type": kind}
    return ev(name, dev_us=us, device=DeviceType.CUDA, is_user_annotation=kind not in ("kernel", None),
              time_range=SimpleNamespace(start=start), device_index=0, device_resource_id=stream, **extra)


def cpu_op(name, parent, start):
    return ev(name, parent, kernels=[], time_range=SimpleNamespace(start=start))


def test_kernel_split_of_a_graph_replay_takes_each_kernels_category_from_the_ungraphed_step():
    """Issue 54's H200 run: "rest" was 63 of a 66 ms profiled step the graph ran
    in 3.8 ms: the device-side spans of record_function ranges (decode_step,
    ~the whole launch-bound step) were summed as kernels. Here a made-up
    profile of an un-graphed compiled step: one cuBLAS kernel name in two
    categories (our dequantize-then-mm op, the lm_head), Inductor kernels named
    after what they fused, a template mm, and a 50 ms annotation span."""
    step = cpu_op("decode_step", None, 1)
    region = cpu_op("## Call CompiledFxGraph abc ##", step, 2)
    quant = cpu_op("qgemm::linear", region, 3)
    q_mm = cpu_op("aten::mm", quant, 4)
    fused = cpu_op("triton_poi_fused__scaled_dot_product_flash_attention_0", region, 5)
    flash = cpu_op("aten::_scaled_dot_product_flash_attention", region, 6)
    tem = cpu_op("triton_tem_fused_mm_0", region, 7)
    head = cpu_op("aten::mm", region, 8)
    # The lm_head's GEMM takes as long as the quantized op's: name and duration alone cannot tell them apart,
    # the order of launch does.
    ks = [kernel("dequant_kernel", 30.0, 10, quant), kernel("nvjet_tst_gemm", 100.0, 41, q_mm),
          kernel("triton_poi_fused__scaled_dot_product_flash_attention_0", 5.0, 142, fused),
          kernel("flash_fwd_splitkv_kernel", 40.0, 148, flash), kernel("triton_tem_fused_mm_0", 60.0, 190, tem),
          kernel("nvjet_tst_gemm", 100.0, 251, head), kernel("Memset (Device)", 1.0, 352, region, "gpu_memset")]
    spans = [kernel("decode_step", 50000.0, 9, step, "gpu_user_annotation"),
             kernel("## Call CompiledFxGraph abc ##", 40000.0, 9, region, "gpu_user_annotation")]
    ops = [step, region, quant, q_mm, fused, flash, tem, head]
    ref = profile.attributed(ops[::-1] + spans + ks[::-1])  # any order in: start order out
    assert [(n, c) for n, c, _ in ref] == [
        ("dequant_kernel", "quant_gemm"), ("nvjet_tst_gemm", "quant_gemm"),
        ("triton_poi_fused__scaled_dot_product_flash_attention_0", "other"),
        ("flash_fwd_splitkv_kernel", "attention"), ("triton_tem_fused_mm_0", "dense_gemm"),
        ("nvjet_tst_gemm", "dense_gemm"), ("Memset (Device)", "other")]
    plain = profile.kernel_split(ref)
    assert plain == pytest.approx({"quant_gemm": 0.13, "dense_gemm": 0.16, "attention": 0.04, "collective": 0.0,
                                   "other": 0.006, "total": 0.336})  # the spans are not in it
    # torch 2.11's events: no activity_type; the spans are told by is_user_annotation.
    old = [kernel(e.name, e.device_time_total, e.time_range.start, kind=None if e.activity_type == "kernel"
                  else e.activity_type) for e in ks + spans]
    assert profile.attributed(ops + old) == ref

    # Two replays of the graph: no operators, kernels in launch order, plus a kernel the un-graphed step
    # did not run (named as cuBLAS's split-K reduction: dense by its name).
    replay = [kernel(k.name, k.device_time_total * 1.5, 1000 * r + 1.5 * k.time_range.start)
              for r in range(2) for k in ks]
    replay.append(kernel("cublasLt::splitKreduce_kernel", 2.0, 3000))
    replay.append(kernel("decode_step", 9000.0, 0, kind="gpu_user_annotation"))
    work = profile.device_work(replay)
    got, source = profile.replay_kernels(work, ref + ref)
    assert source == profile.SOURCES["graph"] and len(got) == 2 * len(ks) + 1
    ms = profile.kernel_split(got)
    assert ms == pytest.approx({"quant_gemm": 0.39, "dense_gemm": 0.482, "attention": 0.12, "collective": 0.0,
                                "other": 0.018, "total": 1.01})
    assert sum(ms[c] for c in profile.CATEGORIES) == pytest.approx(ms["total"])
    # The rest's kernels by time a step: the Memset and Inductor's SDPA prologue, 1.5 and 7.5 us.
    assert profile.top_kernels(got, reps=2) == [
        {"name": "triton_poi_fused__scaled_dot_product_flash_attention_0", "calls": 1.0, "us": 7.5},
        {"name": "Memset (Device)", "calls": 1.0, "us": 1.5}]
    assert profile.top_kernels(got, reps=2, n=1)[0]["us"] == 7.5
    assert profile.top_kernels(got, 2, "dense_gemm")[0] == {"name": "nvjet_tst_gemm", "calls": 1.0, "us": 150.0}
    # A replay the profiler shows as one event (or none): the un-graphed step's split, marked so.
    assert profile.replay_kernels(work[:1], ref) == (ref, profile.SOURCES["fallback"])
    assert profile.replay_kernels([], ref)[1] == profile.SOURCES["fallback"]


def test_a_kernel_that_waits_on_the_one_before_with_pdl_adds_only_its_own_time():
    """Issue 54's 8B step: with PDL a kernel starts while the one before it
    runs and waits for it, and the profiler's durations overlap (the int4
    step's kernels summed to 2.95 ms of a 2.78-ms step, its "rest" 0.82 ms
    against bf16's 0.70 with the same Inductor kernels). Each activity counts
    from where the ones before it on its stream ended: our GEMM's 10 us stay
    its own, the norm launched 3 us early adds 2; a kernel inside another
    adds nothing; another stream's overlap is concurrency and stays."""
    gemm = kernel("fused_kernel", 10.0, 0)
    norm = kernel("triton_red_fused_add_mean_mul_pow_rsqrt_0", 5.0, 7)  # waits 3 us for fused_kernel
    inner = kernel("triton_poi_fused_mul_silu_1", 1.0, 8)  # starts and ends inside norm's span
    comm = kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 6.0, 9, stream=9)
    last = kernel("fused_kernel", 10.0, 20)  # after a gap: the gap is in no one's time
    work = profile.device_work([last, comm, inner, norm, gemm])
    assert [k.name for k in work][:2] == ["fused_kernel", "triton_red_fused_add_mean_mul_pow_rsqrt_0"]
    assert profile.exclusive(work) == [10.0, 2.0, 0.0, 6.0, 10.0]
    ref = [(k.name, profile.kernel_category(k.name), us) for k, us in zip(work, profile.exclusive(work), strict=True)]
    got, source = profile.replay_kernels(work, ref)
    assert source == profile.SOURCES["graph"]
    assert profile.kernel_split(got) == pytest.approx({"quant_gemm": 0.02, "dense_gemm": 0.0, "attention": 0.0,
                                                       "collective": 0.006, "other": 0.002, "total": 0.028})
    # Without the overlap every duration counts whole, as before.
    apart = profile.device_work([kernel("fused_kernel", 10.0, 0), kernel("triton_poi_fused_mul_silu_1", 5.0, 10)])
    assert profile.exclusive(apart) == [10.0, 5.0]


def test_names_of_operators_and_kernels():
    assert [profile.category(n) for n in ("qgemm::linear", "aten::addmm", "aten::_efficient_attention_forward",
                                          "triton_poi_fused_add_mul_0", "triton_red_fused__scaled_dot_product_0",
                                          "triton_tem_fused_addmm_1", "triton_tem_fused_0", "aten::add",
                                          # a flex kernel that absorbed the rotary's bmm (Inductor, torch 2.11)
                                          "triton_tem_fused__to_copy_add_arange_bmm_cat_cos_expand_flex_attention_"
                                          "floor_divide_mul_neg_select_sin_slice_sort_sum_transpose_unsqueeze_view_8")
            ] == ["quant_gemm", "dense_gemm", "attention", None, None, "dense_gemm", "attention", None, "attention"]
    # Flex decoding's merge of its KV splits, an Inductor reduction named after what it absorbed (8B int4
    # step, session 51: 32 calls a step, counted as the rest until then): attention. A pointwise kernel
    # naming flex_attention (the rotary and cache write before it) stays the rest.
    merge = ("triton_per_fused__to_copy_add_arange_bmm_cat_cos_flex_attention_floor_divide_linear_mul_neg_sin_"
             "slice_sort_split_with_sizes_sum_7")
    assert profile.category(merge) == profile.kernel_category(merge) == "attention"
    assert profile.kernel_category(merge.replace("triton_per_", "triton_red_")) == "attention"
    # --attention triton: our op and its kernel; qgemm's other ops stay the rest.
    assert profile.category("qgemm::decode_attention") == "attention" == profile.kernel_category(
        "decode_attention_kernel")
    assert profile.category("qgemm::last_position") == "other"
    prep = "triton_poi_fused__to_copy_add_arange_bmm_cat_cos_flex_attention_floor_divide_mul_neg_sin_slice_5"
    assert profile.category(prep) is None and profile.kernel_category(prep) == "other"
    # Under max-autotune Inductor runs bf16's M = 1 linears as its own reductions, absorbing the norm or
    # the flex merge before them (8B, session 52: 3.9 of a 5.0-ms step counted as the rest, 1.1 as
    # attention): the dense GEMM's work. A pointwise kernel naming mm does none of it.
    for mm in ("triton_red_fused__to_copy__unsafe_view_add_embedding_mean_mm_mul_pow_rsqrt_t_view_13",
               "triton_red_fused__unsafe_view_mm_mul_silu_split_with_sizes_t_view_14",
               "triton_red_fused__to_copy_add_arange_flex_attention_floor_divide_mm_slice_sort_sum_t_transpose_view_11",
               "triton_per_fused_addmm_0"):
        assert profile.category(mm) == profile.kernel_category(mm) == "dense_gemm", mm
    # qgemm's other ops are not GEMMs: flex decode's position copy.
    assert profile.category("qgemm::last_position") == "other"
    names = {"fused_kernel": "quant_gemm", "weight_only_kernel": "quant_gemm", "ws_kernel": "quant_gemm",
             "reduce_planes": "quant_gemm", "_helion_weight_only": "quant_gemm",
             "void tinygemm_m16n8k16_chunk_kernel<...>": "quant_gemm",
             "gemv_A16fWnO16f_int32packing": "quant_gemm", "void cutlass::Kernel<bf16i4bf16_shuffled>": "quant_gemm",
             "nvjet_tst_64x8_64x16_4x1_v_bz_TNT": "dense_gemm", "sm90_xmma_gemm_bf16bf16": "dense_gemm",
             "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm>": "dense_gemm",
             "flash_fwd_splitkv_kernel": "attention", "fmha_cutlassF_bf16_aligned": "attention",
             "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0": "other",
             "triton_poi_fused_mm_0": "other", "Memcpy DtoD (Device -> Device)": "other",
             # tensor parallel's all-reduce, 70B TP2 (results/h200x2): counted as the rest before
             "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "collective"}
    assert {n: profile.kernel_category(n) for n in names} == names
    # its operators, eager and traced, and the process group's record functions (gloo on CPU)
    assert {profile.category(n) for n in ("c10d::allreduce_", "_c10d_functional::all_reduce_",
                                          "_c10d_functional::wait_tensor", "nccl:all_reduce",
                                          "gloo:all_reduce")} == {"collective"}


def test_report_says_which_step_the_split_profiled():
    from qgemm_bench.model.outputs import FALLBACK, ModelRow, bandwidth_table, split_note

    def row(batch, source):
        return ModelRow("m", "triton", "int4-g128", batch, "bfloat16", "cuda:0", "graph", "ok", step_ms_p50=4.0,
                        effective_gbps=1e3, split_quant_gemm_ms=2.0, split_dense_gemm_ms=0.25,
                        split_attention_ms=0.5, split_other_ms=0.75, split_total_ms=3.5, split_source=source)

    graphed = [row(1, profile.SOURCES["graph"]), row(16, profile.SOURCES["graph"])]
    assert "one replay of the timed step's CUDA graph" in split_note(graphed, "graph")
    assert FALLBACK not in bandwidth_table(graphed) and FALLBACK.strip() not in split_note(graphed, "graph")
    mixed = [graphed[0], row(16, profile.SOURCES["fallback"])]
    table = bandwidth_table(mixed).splitlines()
    assert FALLBACK not in table[2] and f"3.500{FALLBACK}" in table[3]
    assert "no kernels in the replay" in split_note(mixed, "graph")
    assert "(no CUDA graph)" in split_note([row(1, profile.SOURCES["plain"])], "eager")
    assert "the profiler failed" in split_note([*graphed, row(4, "not profiled: RuntimeError: x")], "graph")
    assert "the profiler failed" not in split_note(graphed, "graph")


def test_tensor_parallel_report_takes_the_all_reduce_share_from_the_profiled_step():
    """70B TP2 (results/h200x2): the all-reduces replayed alone took 3.3 ms
    of a 12.0-ms step (27%) where their kernels took 2.0 ms of the profiled
    step, and they were in its rest. A row with the collective split shows
    that share and an all-reduce column; one without it (runs before) the
    alone share, and one GPU's rows neither."""
    from qgemm_bench.model.outputs import ModelRow, bandwidth_table, decode_table

    def row(backend, collective, alone=3.3):
        return ModelRow("m", backend, "none" if backend == "bf16" else "int4-g128", 1, "bfloat16", "cuda:0",
                        "graph", "ok", step_ms_p50=12.0, tokens_per_s=83.3, effective_gbps=1e3,
                        split_quant_gemm_ms=7.7, split_dense_gemm_ms=0.0, split_attention_ms=0.7,
                        split_collective_ms=collective, split_other_ms=1.4, split_total_ms=11.8,
                        split_source=profile.SOURCES["graph"], allreduce_ms=alone,
                        allreduce_share=None if alone is None else alone / 12.0)

    tp = [row("bf16", 1.2), row("triton", 2.0)]
    assert "all-reduce 17%" in decode_table(tp).splitlines()[-1]  # 2.0 / 11.8, not 3.3 / 12.0
    head, _, bf16, ours = bandwidth_table(tp).splitlines()
    assert [c.strip() for c in head.split("|")][10:13] == ["attention ms", "all-reduce ms", "rest ms"]
    assert [c.strip() for c in ours.split("|")][11:13] == ["2.000 (17%)", "1.400 (12%)"]
    old = [row("triton", None)]  # a run before the collective category: the alone figure, no column
    assert "all-reduce 27%" in decode_table(old) and "all-reduce ms" not in bandwidth_table(old)
    # Each rank's own share where the run gathered them (a rank that gets there first waits): their range
    both = [row("triton", 2.0)]
    both[0].allreduce_rank_shares = [2.0 / 11.8, 0.25]
    assert "83.3, all-reduce 17-25%" in decode_table(both)
    both[0].allreduce_rank_shares = [0.171, 0.174]  # the same to the percent: one figure
    assert "83.3, all-reduce 17% |" in decode_table(both)
    one = [row("triton", 0.0, alone=None)]
    assert "all-reduce" not in decode_table(one) and "all-reduce ms" not in bandwidth_table(one)


def test_report_names_the_rest_s_largest_kernels_and_the_csv_leaves_them_out(tmp_path):
    import json

    from qgemm_bench.model.outputs import CSV_COLUMNS, ModelRow, attention_table, rest_table, row_from_dict

    top = [{"name": "triton_poi_fused_index_put_1", "calls": 32, "us": 90.0},
           {"name": "triton_per_fused_add_mean_mul_pow_rsqrt_0", "calls": 64.0, "us": 180.5},
           {"name": "bad", "calls": "x", "us": 1}, {"calls": 1, "us": 500.0}, {"name": "neg", "calls": 1, "us": -5},
           {"name": "nan", "calls": 1, "us": float("nan")}, {"name": "a|b\n`c`", "calls": 1, "us": 1.0}]
    r = ModelRow("m", "triton", "int4-g128", 1, "bfloat16", "cuda:0", "graph", "ok", split_other_top=top)
    lines = rest_table([r]).splitlines()  # largest first whatever the file's order; odd entries left out
    assert len(lines) == 5 and "| `triton_per_fused_add_mean_mul_pow_rsqrt_0` |" in lines[2] and "180.5" in lines[2]
    assert "`a/b 'c'`" in lines[4] and all(w not in rest_table([r]) for w in ("bad", "neg", "nan", "500"))
    assert rest_table([ModelRow("m", "bf16", "none", 1, "bfloat16", "cpu", "cpu-wall", "ok")]) == ""
    assert "split_other_top" not in CSV_COLUMNS and "split_attention_top" not in CSV_COLUMNS
    assert attention_table([r]) == ""  # no attention kernels recorded
    r.split_attention_top = [{"name": "decode_attention_kernel", "calls": 32, "us": 240.0}, *top[2:4]]
    att = attention_table([r]).splitlines()
    assert len(att) == 3 and "kernel (attention)" in att[0] and "`decode_attention_kernel` |" in att[2]
    clean = ModelRow("m", "triton", "int4-g128", 1, "bfloat16", "cuda:0", "graph", "ok", split_other_top=top[:2],
                     split_attention_top=top[:1])
    assert row_from_dict(json.loads(json.dumps(clean.to_dict())), "row 1") == clean  # results.json round trip


def test_a_failing_profiler_costs_the_split_not_the_timing(monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("CUPTI said no")

    monkeypatch.setattr(profile, "step_split", broken)
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED)
    t = decode.time_decode(model, 2, 5, 3, CPU)
    assert len(t.samples_ms) == 3 and "split" not in t.extra
    assert t.extra["split_source"] == "not profiled: RuntimeError: CUPTI said no"
    fields = bench.step_fields(t, None)
    assert fields["split_source"] == t.extra["split_source"] and "split_total_ms" not in fields


# ------------------------------------------------- slow (CPU, opt-in) and GPU


def _tp_worker(rank: int, world: int, port: int, out: str) -> None:
    import os

    import torch.distributed as dist

    from qgemm_bench.model import tensor_parallel
    from qgemm_bench.model.quant_linear import quantize_model

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    shard = tensor_parallel.Shard(rank, world)
    model = tensor_parallel.shard_model(build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED), shard)
    quantize_model(model, "torch", "int4-g32")
    tensor_parallel.add_all_reduce(model, shard)
    t = decode.time_decode(model, 2, 5, 3, CPU, compile="default", split=False, attention="flex")
    torch.save({"check": t.check_rel_err, "compile_s": t.extra["compile_s"], "attention": t.extra["attention"]},
               f"{out}.{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.skipif(not __import__("os").environ.get("QGEMM_SLOW_TESTS"), reason="about 60 s: QGEMM_SLOW_TESTS=1")
def test_tensor_parallel_step_compiles_whole_with_its_all_reduces(tmp_path):
    """Two gloo ranks: the hooks' in-place dist.all_reduce is traced into the
    fullgraph step (a graph break would raise) and the compiled step, with
    flex attention on the local heads, equals the uncompiled one."""
    import torch.multiprocessing as mp

    port = free_port()
    mp.spawn(_tp_worker, args=(2, port, str(tmp_path / "r")), nprocs=2, join=True)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"r.{rank}.pt")
        assert got["check"] < 1e-5 and got["compile_s"] > 0 and got["attention"] == "flex"


def small_gpu_model(backend: str, dev):
    """A 2-layer bf16 Llama of GPU-sized heads (8 of 64, 2 KV), int4-g128 on
    `backend` unless bf16; and its config."""
    from qgemm_bench.model.quant_linear import quantize_model

    cfg = dict(TINY, hidden_size=512, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=2,
               head_dim=64, vocab_size=4096)
    model = build_model(config_for("tiny", **cfg), dev, torch.bfloat16, SEED)
    if backend != "bf16":
        quantize_model(model, backend, "int4-g128")
    return model, cfg


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend,attention,pdl", [("bf16", "sdpa", False), ("triton", "sdpa", False),
                                                   ("tinygemm", "sdpa", False), ("triton", "flex", False),
                                                   ("triton", "flex", True), ("bf16", "triton", False),
                                                   ("triton", "triton", True)])
def test_compiled_step_in_a_cuda_graph_on_gpu(backend, attention, pdl):
    """The whole path of a --compile default row on a small Llama: compile,
    capture in our CUDA graph, replay vs the model's own eager step, the bytes
    and the kernel split (our GEMM kernels are attributed to qgemm::linear).
    pdl: Inductor's kernels with PDL (--pdl), on a GPU that has it."""
    if pdl and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("PDL needs compute capability 9.0+")
    dev = torch.device("cuda")
    model, cfg = small_gpu_model(backend, dev)
    from qgemm_bench.backends.triton_kernels import split_k_parts

    launched, pdl_launch = [], split_k_parts.pdl_launch  # our kernels' PDL modes as launched

    def recording(*a, **kw):
        got = pdl_launch(*a, **kw)
        launched.append(got["PDL"])
        return got

    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(split_k_parts, "pdl_launch", recording)
            t = decode.time_decode(model, 4, 16, 8, dev, mode="graph", compile="default", attention=attention,
                                   pdl=pdl)
    finally:
        torch._dynamo.reset()
    if pdl and backend == "triton":  # the tiny model's store entries have PDL 1 or 2: in the step, chained as 3
        assert 3 in launched and not {1, 2} & set(launched), launched
    assert t.mode == "graph" and t.check_rel_err < 0.1 and t.extra["compile_s"] > 0
    assert t.extra["attention"] == attention and t.extra["pdl"] == pdl
    assert t.extra["fused_rope"] == (attention == "triton")  # rotary and cache write in our kernel (its default)
    split = t.extra["split"]
    assert split["attention"] > 0 and split["total"] > 0
    assert (split["quant_gemm"] > 0) == (backend != "bf16") and split["dense_gemm"] > 0  # lm_head is cuBLAS
    assert sum(split[c] for c in profile.CATEGORIES) == pytest.approx(split["total"])
    # The timed step, a graph replay, profiled kernel by kernel: busy time within the step it timed. With
    # PDL each kernel starts while the one before ends; each counts from that end (profile.exclusive), so
    # the overlap is not summed twice and the total stays under the step, PDL or not (10% for the profiler).
    assert t.extra["split_source"] == profile.SOURCES["graph"] and t.extra["split_kernels"] > 20
    assert split["total"] <= 1.1 * t.p50 and split["other"] < split["total"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["bf16", "triton"])
def test_prefill_in_a_cuda_graph_on_gpu(backend):
    """The timed prefill's graph: a replay into a zeroed cache gives the
    eager prefill's logits (so it wrote the cache its attention read), and
    time_prefill replays it (mode graph, no capture error)."""
    dev = torch.device("cuda")
    model, cfg = small_gpu_model(backend, dev)
    ids = decode.random_tokens(cfg["vocab_size"], 1, 96, SEED, dev)
    cache = decode.static_cache(model, 96)
    with torch.no_grad():
        want = decode.prefill(model, cache, ids).float()
        graph, logits, _ = decode._prefill_graph(model, cache, ids)
        for layer in cache.layers:
            layer.keys.zero_()
            layer.values.zero_()
        decode.rewind(cache, 0)
        graph.replay()
    assert rel(logits.float(), want) < 2e-2, f"seed {SEED}: {rel(logits.float(), want)}"  # split-K sums' order
    t = decode.time_prefill(model, 96, dev, reps=2)
    assert t.mode == "graph" and "prefill_graph_error" not in t.extra and t.p50 > 0


def test_pdl_context_sets_inductor_s_pdl_and_chains_ours_until_it_ends(monkeypatch):
    """--pdl's step runs Inductor's kernels with PDL and ours in their chained
    modes: inside decode.inductor_pdl, Inductor's triton.enable_pdl is set and
    our PDL 2 launches as 3 (the wait before the next kernel's release; on a
    CUDA device, none is needed to ask); outside, both as before. Off, it
    sets enable_pdl off (as if TORCHINDUCTOR_ENABLE_PDL=1 had turned it on)
    and leaves ours as they are. On CPU no PDL runs."""
    import torch._inductor.config as inductor_config

    from qgemm_bench.backends.triton_kernels import split_k_parts

    monkeypatch.delenv("QGEMM_PDL", raising=False)
    monkeypatch.setattr(inductor_config.triton, "enable_pdl", True)
    gpu, c = torch.device("cuda"), {"PDL": 2}
    with decode.inductor_pdl(False):
        assert inductor_config.triton.enable_pdl is False
        assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 2, "launch_pdl": True}
    assert inductor_config.triton.enable_pdl is True
    monkeypatch.setattr(inductor_config.triton, "enable_pdl", False)
    before = False
    with decode.inductor_pdl():
        assert inductor_config.triton.enable_pdl is True
        assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 3, "launch_pdl": True}
    assert inductor_config.triton.enable_pdl == before
    assert split_k_parts.pdl_launch(c, gpu) == {"PDL": 2, "launch_pdl": True}
    assert not decode.pdl_runs(CPU)


def test_flex_choice_outside_a_compiled_step_is_the_sdpa_path_and_its_bytes():
    """--attention flex changes compiled steps only; its cache is whole KV
    blocks, and the bytes count the blocks it reads."""
    model = build_model(config_for("tiny", **TINY), CPU, torch.float32, SEED)
    assert decode.cache_len(5, 3, "sdpa") == 5 + 3 + decode.WARMUP_STEPS + 1
    assert decode.cache_len(5, 3, "flex") == decode.FLEX_BLOCK == decode.cache_len(100, 24, "flex")
    assert decode.cache_len(100, 25, "flex") == 2 * decode.FLEX_BLOCK
    t = decode.time_decode(model, 2, 5, 3, CPU, attention="flex", split=False)
    assert model.config._attn_implementation == decode.ATTENTIONS["flex"] and t.extra["attention"] == "sdpa"
    assert t.extra["compile_s"] is None  # an uncompiled step has no compile time
    cache = decode.static_cache(model, 256)
    decode.prefill(model, cache, decode.random_tokens(TINY["vocab_size"], 2, 4, SEED, CPU))
    whole = profile.step_bytes(model, cache, 2)
    assert whole["kv_bytes"] == 2 * 2 * 2 * 2 * 256 * 16 * 4  # K and V, layers, batch, KV heads, slots, head dim, fp32
    assert profile.step_bytes(model, cache, 2, attended=128)["kv_bytes"] == whole["kv_bytes"] // 2


def test_inductor_options_are_set_for_compiled_steps_only(monkeypatch):
    """Compiled steps run under Inductor's triton.multi_kernel, combo_kernels
    and the run's --inductor-config (every variant alike, so speedups compare
    the same compiler; an override wins over the defaults); outside, the
    settings are what they were, and an uncompiled step never enters them."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config.triton, "multi_kernel", 0)
    monkeypatch.setattr(inductor_config, "combo_kernels", False)
    with decode.inductor_options():
        assert inductor_config.triton.multi_kernel == decode.MULTI_KERNEL != 0
        assert inductor_config.combo_kernels is decode.COMBO_KERNELS is True
        assert inductor_config.fx_graph_cache is False  # both on: a cached graph failed to load (torch 2.11)
    over = decode.inductor_overrides(" combo_kernels=False, triton.multi_kernel=0 ,")
    assert over == {"combo_kernels": False, "triton.multi_kernel": 0}
    with decode.inductor_options(over):
        assert inductor_config.combo_kernels is False and inductor_config.triton.multi_kernel == 0
    assert inductor_config.triton.multi_kernel == 0 and inductor_config.combo_kernels is False
    seen = []

    def fake(*args):
        seen.append((inductor_config.triton.multi_kernel, inductor_config.combo_kernels))
        return decode.Timing([1.0], "cpu-wall")

    monkeypatch.setattr(decode, "_time_decode", fake)
    # inductor_pdl has its own test; here it stays out (in one CI worker an earlier test's left
    # triton.enable_pdl unreadable, which this test is not about).
    monkeypatch.setattr(decode, "inductor_pdl", lambda on=True: contextlib.nullcontext())
    for compile in ("none", "default"):
        decode.time_decode(None, 1, 1, 1, CPU, compile=compile, inductor={"triton.multi_kernel": 2})
    decode.time_decode(None, 1, 1, 1, CPU, compile="default")
    assert seen == [(0, False), (2, True), (decode.MULTI_KERNEL, True)]


@pytest.mark.parametrize("text, says", [("nope=1", "has no 'nope'"), ("combo_kernels=2", "expected bool"),
                                        ("triton.multi_kernel=x", "expected int"), ("=1", "KEY=VALUE"),
                                        ("triton.enable_pdl=True", "use --pdl")])
def test_inductor_overrides_refuse_unknown_keys_and_wrong_types(text, says):
    with pytest.raises(ValueError, match=says):
        decode.inductor_overrides(text)


def test_inductor_overrides_take_values_with_commas_and_none():
    assert decode.inductor_overrides("max_autotune_gemm_backends=ATEN,TRITON, compile_threads=None") == \
        {"max_autotune_gemm_backends": "ATEN,TRITON", "compile_threads": None}
