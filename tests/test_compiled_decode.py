"""The compiled decode step on CPU (issue 54): torch.compile(fullgraph=True)
of a whole step of a tiny random Llama with fp32 and int4 layers (the int4
GEMM through the custom op qgemm::linear) gives the eager model's logits;
the op's fake implementation; the GQA-packed decode attention against
transformers' own; the bytes a step reads against a hand count; the step
split's categories. One compile in this file (about 10 s on 2 cores)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from torch.autograd import DeviceType  # noqa: E402

from qgemm_bench.model import bench, decode, ops, profile  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import QuantLinear, parse_quant  # noqa: E402
from tests.support import one_thread  # noqa: E402, F401 (autouse: the tiny model on one thread)

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


def rel(a, b) -> float:
    return (torch.linalg.vector_norm(a.double() - b.double()) / torch.linalg.vector_norm(b.double())).item()


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
    model.set_attn_implementation("eager")
    first = decode.prefill(model, cache, ids)[:, -1:].argmax(-1)
    ref_step = decode.DecodeStep(model, cache, batch, CPU)
    ref_step.tok.copy_(first)
    ref = []
    for _ in range(steps):
        ref.append(ref_step().clone())
        ref_step.feed_greedy(ref[-1])

    decode.use_decode_attention(model)
    decode.rewind(cache, prompt)
    step = decode.DecodeStep(model, cache, batch, CPU, compile="default")
    step.tok.copy_(first)
    try:
        for i in range(steps):
            out = step()
            assert out.shape == ref[i].shape == (batch, 1, TINY["vocab_size"])
            assert rel(out, ref[i]) < 1e-5, i
            step.feed_greedy(out)
        assert step.compile_s > 0 and hasattr(step.fn, "_torchdynamo_orig_callable")  # a compiled callable
        assert int(cache.layers[0].cumulative_length) == prompt + steps  # the compiled step advanced the cache
        # The same step under the profiler: quantized GEMMs, dense GEMMs (layer 0, lm_head) and attention
        # all show, and the categories sum to the step.
        decode.rewind(cache, prompt)
        split = profile.step_split(step.eager, CPU)
        assert split["quant_gemm"] > 0 and split["dense_gemm"] > 0 and split["attention"] > 0
        assert sum(split[c] for c in profile.CATEGORIES) == pytest.approx(split["total"], rel=1e-9)
    finally:
        torch._dynamo.reset()


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


def ev(name, parent=None, cpu_us=0.0, dev_us=0.0, device=DeviceType.CPU):
    return SimpleNamespace(name=name, cpu_parent=parent, cpu_time_total=cpu_us, device_time_total=dev_us,
                           device_type=device, is_async=False)


def test_split_counts_each_operator_once_by_its_outermost_category():
    step = ev("decode_step", cpu_us=1000.0, dev_us=900.0)
    op = ev("qgemm::linear", step, 300.0, 250.0)
    inner = ev("aten::mm", op, 200.0, 240.0)  # the torch backend's matmul inside our op: still ours
    lin = ev("aten::linear", step, 100.0, 80.0)
    mm = ev("aten::mm", lin, 90.0, 80.0)
    sdpa = ev("aten::scaled_dot_product_attention", step, 50.0, 40.0)
    flash = ev("aten::_scaled_dot_product_flash_attention", sdpa, 45.0, 40.0)
    norm = ev("aten::rms_norm", step, 20.0, 30.0)
    kernels = [ev(f"k{i}", device=DeviceType.CUDA, dev_us=d) for i, d in enumerate((250.0, 80.0, 40.0, 30.0, 100.0))]
    events = [step, op, inner, lin, mm, sdpa, flash, norm, *kernels]
    cpu = profile.split_events(events, cuda=False)
    assert cpu == pytest.approx({"quant_gemm": 0.3, "dense_gemm": 0.1, "attention": 0.05, "other": 0.55,
                                 "total": 1.0})
    gpu = profile.split_events(events, cuda=True)  # total: every kernel, attributed or not
    assert gpu == pytest.approx({"quant_gemm": 0.25, "dense_gemm": 0.08, "attention": 0.04, "other": 0.13,
                                 "total": 0.5})
    assert [profile.category(n) for n in ("qgemm::linear", "aten::addmm", "aten::_efficient_attention_forward",
                                          "triton_poi_fused_add_mul_0")] == \
        ["quant_gemm", "dense_gemm", "attention", None]


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
    t = decode.time_decode(model, 2, 5, 3, CPU, compile="default", split=False)
    torch.save({"check": t.check_rel_err, "compile_s": t.extra["compile_s"]}, f"{out}.{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.skipif(not __import__("os").environ.get("QGEMM_SLOW_TESTS"), reason="about 60 s: QGEMM_SLOW_TESTS=1")
def test_tensor_parallel_step_compiles_whole_with_its_all_reduces(tmp_path):
    """Two gloo ranks: the hooks' in-place dist.all_reduce is traced into the
    fullgraph step (a graph break would raise) and the compiled step equals the
    uncompiled one."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_tp_worker, args=(2, port, str(tmp_path / "r")), nprocs=2, join=True)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"r.{rank}.pt")
        assert got["check"] < 1e-5 and got["compile_s"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend,attention", [("bf16", "sdpa"), ("triton", "sdpa"), ("tinygemm", "sdpa"),
                                               ("triton", "flex")])
def test_compiled_step_in_a_cuda_graph_on_gpu(backend, attention):
    """The whole path of a --compile default row on a small Llama: compile,
    capture in our CUDA graph, replay vs the model's own eager step, the bytes
    and the kernel split (our GEMM kernels are attributed to qgemm::linear).
    flex is checked here only: CPU Inductor cannot lower its block mask (the
    position it captures is computed in the graph)."""
    from qgemm_bench.model.quant_linear import quantize_model

    dev = torch.device("cuda")
    cfg = dict(TINY, hidden_size=512, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=2,
               head_dim=64, vocab_size=4096)
    model = build_model(config_for("tiny", **cfg), dev, torch.bfloat16, SEED)
    if backend != "bf16":
        quantize_model(model, backend, "int4-g128")
    try:
        t = decode.time_decode(model, 4, 16, 8, dev, mode="graph", compile="default", attention=attention)
    finally:
        torch._dynamo.reset()
    assert t.mode == "graph" and t.check_rel_err < 0.1 and t.extra["compile_s"] > 0
    assert t.extra["attention"] == attention
    split = t.extra["split"]
    assert split["attention"] > 0 and split["total"] > 0
    assert (split["quant_gemm"] > 0) == (backend != "bf16") and split["dense_gemm"] > 0  # lm_head is cuBLAS
    assert sum(split[c] for c in profile.CATEGORIES) == pytest.approx(split["total"])


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
