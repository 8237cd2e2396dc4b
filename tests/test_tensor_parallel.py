"""Tensor-parallel Llama (CPU, gloo, world size 2): the split reproduces the
whole model's logits, unquantized and int4; a model built as shards has the
local shapes; a torchrun run writes its outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytest.importorskip("transformers")

from qgemm_bench.model import tensor_parallel  # noqa: E402
from qgemm_bench.model.llama import build_model, config_for  # noqa: E402
from qgemm_bench.model.quant_linear import quantize_model  # noqa: E402
from tests.support import free_port  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SEED = 3


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.double().numpy()


def tiny():
    return build_model(config_for("tiny", num_hidden_layers=2), torch.device("cpu"), torch.float32, seed=SEED)


FORMATS = [None, "int4-g64"]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for fmt in FORMATS:  # one spawned pair for both (each spawn imports torch and transformers anew)
        torch.manual_seed(0)
        shard = tensor_parallel.Shard(rank, world)
        model = tensor_parallel.shard_model(tiny(), shard)
        if fmt:
            quantize_model(model, "torch", fmt)
        tensor_parallel.add_all_reduce(model, shard)
        ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(SEED))
        np.save(f"{out}.{fmt}.{rank}.npy", logits(model, ids))
    # Both ranks reach the teardown together: a rank that destroyed its gloo
    # group while the other was still in its last collective aborted the
    # other once in CI ("terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


def test_split_model_reproduces_the_whole_one(tmp_path):
    """Unquantized and int4 (group 64), each rank's logits against the whole model's."""
    port = free_port()
    mp.spawn(_worker, args=(2, port, str(tmp_path / "y")), nprocs=2, join=True)
    for fmt in FORMATS:
        whole = tiny()
        if fmt:  # groups of 64 along K: a row shard's K (128, 256) splits on group boundaries, so the codes agree
            quantize_model(whole, "torch", fmt)
        ids = torch.randint(0, whole.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(SEED))
        ref = logits(whole, ids)
        for rank in (0, 1):
            got = np.load(tmp_path / f"y.{fmt}.{rank}.npy")
            assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5, (fmt, rank)
        assert whole.config.num_attention_heads == 4  # the caller's config is never changed


def test_built_shards_have_the_local_shapes():
    cfg = config_for("tiny")
    m = tensor_parallel.build_sharded(cfg, torch.device("cpu"), torch.float32, SEED, tensor_parallel.Shard(1, 2))
    attn, mlp = m.model.layers[0].self_attn, m.model.layers[0].mlp
    assert attn.q_proj.weight.shape == (4 * 64 // 2, 256) and attn.k_proj.weight.shape == (2 * 64 // 2, 256)
    assert attn.o_proj.weight.shape == (256, 4 * 64 // 2) and mlp.down_proj.weight.shape == (256, 512 // 2)
    assert mlp.gate_proj.weight.shape == (512 // 2, 256) and m.lm_head.weight.shape == (1024, 256)
    assert m.config.num_attention_heads == 2 and m.config.num_key_value_heads == 1 and cfg.num_attention_heads == 4
    assert torch.isfinite(m.model.rotary_emb.inv_freq).all() and m.model.norm.weight.eq(1).all()
    again = tensor_parallel.build_sharded(cfg, torch.device("cpu"), torch.float32, SEED, tensor_parallel.Shard(1, 2))
    assert torch.equal(again.model.layers[1].mlp.up_proj.weight, m.model.layers[1].mlp.up_proj.weight)
    other = tensor_parallel.build_sharded(cfg, torch.device("cpu"), torch.float32, SEED, tensor_parallel.Shard(0, 2))
    assert not torch.equal(other.model.layers[1].mlp.up_proj.weight, m.model.layers[1].mlp.up_proj.weight)
    assert torch.equal(other.model.embed_tokens.weight, m.model.embed_tokens.weight)  # replicated


def test_indivisible_heads_are_refused():
    from qgemm_bench.errors import InputError

    with pytest.raises(InputError, match="key/value heads .2. is not divisible by 4"):
        tensor_parallel.check_divisible(config_for("tiny"), 4)


def test_torchrun_model_run_writes_its_outputs(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "runner.py", "--model", "tiny", "--device", "cpu", "--backends", "bf16,torch",
                        "--quant", "int4-g64", "--batch", "1", "--no-plots", "--output-dir", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["metadata"]["tensor_parallel"] == 2
    rows = doc["rows"]
    assert [(x["backend"], x["quant"], x["status"]) for x in rows] == [("bf16", "none", "ok"),
                                                                      ("torch", "int4-g64", "ok")]
    assert all(x["allreduce_ms"] > 0 and 0 < x["allreduce_share"] for x in rows)
    assert rows[1]["logits_rel_err"] < 0.5 and "Tensor parallel over 2 GPUs" in (out / "report.md").read_text()
    assert r.stdout.count("results:") == 1


def _symm_worker(rank: int, world: int, port: int, out: str) -> None:
    """--all-reduce symm's routing with a stand-in reducer (symmetric memory
    is CUDA's): gloo sums what the real one would, and records its calls."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    calls = []

    class Standin:
        def __init__(self, s, device, dtype):
            pass

        def __call__(self, x, slot):
            calls.append((slot, x.numel()))
            y = x.clone()
            dist.all_reduce(y)
            return y

    tensor_parallel.SymmReducer = Standin
    hidden = tiny().config.hidden_size
    tensor_parallel.SYMM_MAX_BYTES = 2 * hidden * 4  # fp32: up to 2 tokens a call
    shard = tensor_parallel.Shard(rank, world, all_reduce="symm")
    model = tensor_parallel.shard_model(tiny(), shard)
    tensor_parallel.add_all_reduce(model, shard)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(SEED))
    np.save(f"{out}.long.{rank}.npy", logits(model, ids))  # 24 tokens a call: NCCL's (gloo's) path
    long_calls = len(calls)
    np.save(f"{out}.short.{rank}.npy", logits(model, ids[:, :1]))  # 2 tokens: the reducer's
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")  # the custom op traces whole
    with torch.no_grad():
        np.save(f"{out}.compiled.{rank}.npy", compiled(input_ids=ids[:, :1]).logits.double().numpy())
    torch.save({"calls": calls, "long": long_calls, "hidden": hidden}, f"{out}.calls.{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def test_symm_all_reduce_takes_decode_sized_partials_in_alternate_buffers(tmp_path):
    """--all-reduce symm: partials up to SYMM_MAX_BYTES go through
    qgemm::symm_all_reduce (here a gloo stand-in for the CUDA reducer),
    consecutive sites alternating buffers 0 and 1, larger ones through
    dist.all_reduce; the logits match the whole model's, eager and under a
    fullgraph torch.compile (the custom op and its fake traced whole)."""
    port = free_port()
    mp.spawn(_symm_worker, args=(2, port, str(tmp_path / "s")), nprocs=2, join=True)
    torch.manual_seed(0)
    whole = tiny()
    ids = torch.randint(0, whole.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(SEED))
    want_long, want_short = logits(whole, ids), logits(whole, ids[:, :1])
    layers = whole.config.num_hidden_layers
    for rank in (0, 1):
        got = torch.load(tmp_path / f"s.calls.{rank}.pt")
        assert got["long"] == 0  # 24 tokens: over the limit, every site took dist.all_reduce
        eager = got["calls"][:2 * layers]
        assert [slot for slot, _ in eager] == [0, 1] * layers and all(n == 2 * got["hidden"] for _, n in eager)
        assert len(got["calls"]) >= 4 * layers  # and the compiled step's sites too
        for name, want in (("long", want_long), ("short", want_short), ("compiled", want_short)):
            np.testing.assert_allclose(np.load(tmp_path / f"s.{name}.{rank}.npy"), want, rtol=1e-5, atol=1e-5)


def _symm_gpu_worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    dev = torch.device("cuda", rank)
    shard = tensor_parallel.Shard(rank, world, all_reduce="symm")
    tensor_parallel.reducer(shard, dev, torch.bfloat16)
    hooks = [tensor_parallel._hook(shard, i) for i in range(4)]
    g = torch.Generator(device=dev).manual_seed(SEED + rank)
    errs = []
    for rows in (1, 16):
        x = torch.randn(rows, 8192, device=dev, dtype=torch.bfloat16, generator=g)
        want = x.float().clone()
        dist.all_reduce(want)
        errs.append(float((hooks[0](None, None, x.clone()).float() - want).abs().max()))
        # In a CUDA graph, replayed on new partials: alternate buffers, site after site.
        static = x.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = static
            for h in hooks:
                y = h(None, None, y)
        for _ in range(2):
            static.copy_(torch.randn(rows, 8192, device=dev, dtype=torch.bfloat16, generator=g))
            want = static.float().clone()
            for _ in hooks:
                dist.all_reduce(want)
            graph.replay()
            torch.cuda.synchronize(dev)
            errs.append(float(((y.float() - want).abs() / want.abs().clamp_min(1.0)).max()))
    torch.save(errs, f"{out}.{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_symm_all_reduce_sums_like_nccl_in_a_cuda_graph_on_two_gpus(tmp_path):
    """The real reducer (torch's one-shot symmetric-memory all-reduce, no
    multicast) at 1 and 16 rows of 8192 bf16: equal to NCCL's sum eagerly
    (bf16 rounding) and, four sites chained in a CUDA graph replayed on new
    partials, within bf16's relative rounding of four sums in fp32."""
    port = free_port()
    mp.spawn(_symm_gpu_worker, args=(2, port, str(tmp_path / "g")), nprocs=2, join=True)
    for rank in (0, 1):
        errs = torch.load(tmp_path / f"g.{rank}.pt")
        assert len(errs) == 6 and max(errs) < 0.05, errs
