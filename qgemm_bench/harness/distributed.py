"""A sweep over several GPUs under torchrun (torch.distributed; no process
pool or protocol of our own).

    torchrun --nproc-per-node N runner.py --op int4_gemm ...

Every rank builds the same plan; rank r takes GPU LOCAL_RANK and its share of
the shapes (whole shapes, so a shape's backends and baseline share one GPU
and its speedups stay same-GPU, same-run). Rank 0 claims the run folder and
streams its records to rows.jsonl; rank r > 0 streams to rows.rank<r>.jsonl
in the same folder when it sees it (one host), so `runner.py report DIR`
rebuilds everything measured even if the job dies. At the end the records
and each rank's facts (GPU, ceilings, phase times) are gathered to rank 0
(gather_object), which alone writes the outputs and prints the table. A rank
that does not report costs its rows (error rows), not the run.

The collectives only move Python objects, so they run on gloo whatever the
device: no NCCL communicator is needed for a sweep.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

# A rank waits at the gather for the slowest one: a long sweep is not a hang.
GATHER_TIMEOUT = datetime.timedelta(hours=12)


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    local_rank: int

    @property
    def main(self) -> bool:
        return self.rank == 0


def from_env() -> World | None:
    """The torchrun world of this process, or None when it runs alone."""
    size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if size <= 1:
        return None
    return World(int(os.environ.get("RANK", "0")), size, int(os.environ.get("LOCAL_RANK", "0")))


def start(world: World, device_arg: str, backend: str = "gloo") -> str:
    """Join the process group (gloo: object collectives only; "nccl" where
    ranks exchange GPU tensors, the tensor-parallel model bench); the device
    this rank works on: GPU LOCAL_RANK for auto/cuda (every GPU stays
    visible), else as given."""
    device = f"cuda:{world.local_rank}" if device_arg in ("auto", "cuda") and torch.cuda.is_available() \
        else device_arg
    if device.startswith("cuda"):
        torch.cuda.set_device(device)  # NCCL's collectives use the current device
    if not dist.is_initialized():
        dist.init_process_group(backend if device.startswith("cuda") else "gloo", timeout=GATHER_TIMEOUT)
    return device


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def cost(op, shape, dtype, settings) -> float:
    """Expected seconds of a shape, relative: preparing and compiling cost
    about the same per shape (the measured phases: ~1 s per shape and
    backend, timing ~0.15 s), plus the bytes a call moves."""
    return 1.0 + op.bytes(shape, dtype, settings) / 1e9


def shard(shapes: list, costs: list[float], size: int) -> list[list[int]]:
    """Shape indices per rank, balanced by cost (longest first, each to the
    least loaded rank), each rank's list in plan order."""
    load = [0.0] * size
    parts: list[list[int]] = [[] for _ in range(size)]
    for i in sorted(range(len(shapes)), key=lambda i: (-costs[i], i)):
        r = min(range(size), key=lambda r: (load[r], r))
        parts[r].append(i)
        load[r] += costs[i]
    return [sorted(p) for p in parts]


def broadcast(obj, world: World):
    """Rank 0's object on every rank."""
    box = [obj if world.main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(obj, world: World) -> list | None:
    """Every rank's object on rank 0 (None elsewhere)."""
    out = [None] * world.size if world.main else None
    dist.gather_object(obj, out, dst=0)
    return out
