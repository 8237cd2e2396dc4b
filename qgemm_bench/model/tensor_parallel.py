"""Tensor parallelism for the model bench (torchrun, one GPU per rank): the
Megatron split of a Llama decoder layer, as gpt-fast and torchao's llama
`tp.py` do it.

- column-parallel q/k/v and gate/up: each rank holds N / world output rows of
  the weight (its share of the heads and of the intermediate size);
- row-parallel o_proj and down_proj: each rank holds K / world input columns
  and its partial outputs are summed by one all-reduce;
- embeddings, norms and lm_head are replicated, so every rank holds the same
  logits and feeds the same next token.

The split happens on the bf16 weights; each rank then quantizes its own
shard, so a row-parallel shard's K must be a multiple of the group size
(checked). Attention needs nothing else: transformers' LlamaAttention views
q/k/v with -1 heads, so it runs on the local heads; the config's head counts
are divided so the static KV cache is allocated for the local heads.

The all-reduce is an in-place `dist.all_reduce` in a forward hook of the
row-parallel layers (whatever module quantize_model put there): NCCL
collectives on the current stream are captured in the decode step's CUDA
graph, which is how the step is timed.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from qgemm_bench.model.errors import InputError

COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
ROW = ("o_proj", "down_proj")


@dataclass(frozen=True)
class Shard:
    rank: int
    world: int
    group: object = None  # the process group of the all-reduces (None: the default one)


def check_divisible(config, world: int) -> None:
    """The head counts and the intermediate size must split evenly."""
    for what, v in (("attention heads", config.num_attention_heads),
                    ("key/value heads", config.num_key_value_heads),
                    ("intermediate size", config.intermediate_size)):
        if v % world:
            raise InputError(f"tensor parallelism over {world} ranks: {what} ({v}) is not divisible by {world}")


def _split_linear(lin: nn.Linear, dim: int, s: Shard) -> nn.Linear:
    """This rank's slice of `lin` along the weight's `dim` (0: outputs, 1: inputs)."""
    w = lin.weight
    size = w.shape[dim] // s.world
    part = w.narrow(dim, s.rank * size, size)
    out = nn.Linear(part.shape[1], part.shape[0], bias=lin.bias is not None, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        out.weight.copy_(part)
        if lin.bias is not None:
            if dim == 0:
                out.bias.copy_(lin.bias.narrow(0, s.rank * size, size))
            else:  # added once: after the all-reduce only rank 0's counts
                out.bias.copy_(lin.bias if s.rank == 0 else torch.zeros_like(lin.bias))
    out.requires_grad_(False)
    return out


def shard_model(model, s: Shard):
    """Split a whole (replicated) model's decoder layers in place for rank
    s.rank; the original weights are freed layer by layer. For a model too
    large for one GPU, build_sharded makes the shards directly."""
    check_divisible(model.config, s.world)
    for layer in model.model.layers:
        for parent, names, dim in ((layer.self_attn, ("q_proj", "k_proj", "v_proj"), 0),
                                   (layer.mlp, ("gate_proj", "up_proj"), 0),
                                   (layer.self_attn, ("o_proj",), 1), (layer.mlp, ("down_proj",), 1)):
            for name in names:
                setattr(parent, name, _split_linear(getattr(parent, name), dim, s))
    _local_heads(model, s.world)
    return model


def _local_heads(model, world: int) -> None:
    """The model's own copy of its config counts the local heads (the static
    KV cache is allocated from it); the caller's config is left alone. Every
    module that held the old config takes the copy: the attention modules
    read their implementation from theirs, and transformers 5.17's
    set_attn_implementation sets only the top model's (with the old one
    left below it, TP runs ran transformers' sdpa whatever --attention said)."""
    old = model.config
    new = copy.deepcopy(old)
    new.num_attention_heads //= world
    new.num_key_value_heads //= world
    for module in model.modules():
        if getattr(module, "config", None) is old:
            module.config = new


def build_sharded(config, device: torch.device, dtype: torch.dtype, seed: int, s: Shard):
    """A random-weight Llama whose decoder linears exist only as this rank's
    shards (a 70B model never materializes whole): built on the meta device,
    shards swapped in, then allocated on `device` and initialized (normal
    0.02 like transformers' init; norms 1; rotary tables recomputed). Each
    parameter gets its own seed from its name and the rank."""
    from transformers import LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    check_divisible(config, s.world)
    with torch.device("meta"):
        model = LlamaForCausalLM._from_config(config, dtype=dtype)
        shard_model(model, s)  # meta weights: only shapes change
    model = model.to_empty(device=device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = torch.Generator(device=device).manual_seed(_seed(seed, name, s.rank if _sharded(name) else 0))
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, getattr(config, "initializer_range", 0.02), generator=g)
    with torch.device(device):  # its tables are computed in __init__: meta ones are empty
        model.model.rotary_emb = LlamaRotaryEmbedding(config=model.config)
    model.eval()
    model.requires_grad_(False)
    return model


def _sharded(name: str) -> bool:
    return any(f".{n}." in name for n in COLUMN + ROW)


def _seed(seed: int, name: str, rank: int) -> int:
    digest = hashlib.sha256(f"{seed}/{name}/{rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def add_all_reduce(model, s: Shard) -> list:
    """Sum the row-parallel layers' partial outputs across ranks (after
    quantize_model: hooks are on whatever module sits there). Returns the
    hook handles."""
    def hook(module, inputs, out):
        dist.all_reduce(out, group=s.group)
        return out

    return [getattr(parent, name).register_forward_hook(hook) for layer in model.model.layers
            for parent, name in ((layer.self_attn, "o_proj"), (layer.mlp, "down_proj"))]


def all_reduces_per_step(model) -> int:
    return 2 * len(model.model.layers)


def per_rank(value, s: Shard) -> list:
    """`value` (any picklable) of every rank, in rank order; every rank calls it."""
    out = [None] * s.world
    dist.all_gather_object(out, value, group=s.group)
    return out


def time_all_reduces(calls: int, numel: int, dtype: torch.dtype, device: torch.device, s: Shard,
                     reps: int = 20) -> float:
    """Milliseconds of `calls` all-reduces of `numel` elements (one decode
    step's worth), captured in a CUDA graph like the step itself (on CPU, a
    wall clock around eager calls): the all-reduce share of a step."""
    import time

    buf = torch.zeros(numel, dtype=dtype, device=device)
    if device.type != "cuda":
        dist.barrier(group=s.group)
        t0 = time.perf_counter()
        for _ in range(reps):
            for _ in range(calls):
                dist.all_reduce(buf, group=s.group)
        return (time.perf_counter() - t0) * 1e3 / reps
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # NCCL's lazy setup happens outside the capture
        dist.all_reduce(buf, group=s.group)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            dist.all_reduce(buf, group=s.group)
    graph.replay()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps
