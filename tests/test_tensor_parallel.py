"""Tensor-parallel Llama (CPU, gloo, world size 2): the split reproduces the
whole model's logits, unquantized and int4; a model built as shards has the
local shapes; a torchrun run writes its outputs."""

import copy
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


@pytest.mark.parametrize("made", ["split", "built"])
def test_every_module_takes_the_local_config_and_the_decode_attention(made):
    """Every module that held the model's config holds its local-heads copy,
    so the attention the model is switched to reaches the attention layers
    (with the old config left below the top model, transformers 5.17's
    set_attn_implementation left them on sdpa: TP runs ignored --attention)."""
    from qgemm_bench.model.decode import ATTENTIONS, use_decode_attention

    shard = tensor_parallel.Shard(0, 2)
    if made == "split":
        m = tensor_parallel.shard_model(tiny(), shard)
    else:
        m = tensor_parallel.build_sharded(config_for("tiny"), torch.device("cpu"), torch.float32, SEED, shard)
    use_decode_attention(m, "flex")
    held = [mod for mod in m.modules() if hasattr(mod, "config")]
    assert len(held) > 2 and all(mod.config is m.config for mod in held)
    assert {layer.self_attn.config._attn_implementation for layer in m.model.layers} == {ATTENTIONS["flex"]}
    assert m.model.layers[0].self_attn.config.num_key_value_heads == 1
    # A module left holding another config (as before the fix) is refused, not run under the wrong name.
    stale = copy.deepcopy(m.config)
    stale._attn_implementation_internal = "sdpa"
    m.model.layers[1].self_attn.config = stale
    with pytest.raises(RuntimeError, match="--attention flex: LlamaAttention kept another"):
        use_decode_attention(m, "flex")


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
    assert all(x["split_collective_ms"] > 0 for x in rows)  # gloo's all-reduces, in the step's split
    assert all(len(x["allreduce_rank_shares"]) == 2 and all(0 < v < 1 for v in x["allreduce_rank_shares"])
               for x in rows)  # each rank's share of its own step
    assert "allreduce_rank_shares" not in (out / "results.csv").read_text().splitlines()[0]
    assert rows[1]["logits_rel_err"] < 0.5 and "Tensor parallel over 2 GPUs" in (out / "report.md").read_text()
    assert r.stdout.count("results:") == 1
