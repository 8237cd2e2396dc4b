#!/usr/bin/env python3
"""Under torchrun: one decode step's all-reduces, timed as the model bench
times them (tensor_parallel.time_all_reduces: CALLS in-place all-reduces of
one size, captured in a CUDA graph, replayed), at the sizes of a
Llama-3-70B TP decode step (hidden 8192, bf16: batch 1 and 16), with
whatever NCCL settings the environment gives (NCCL_PROTO, NCCL_ALGO, ...:
they apply when NCCL starts, so run it once per setting). Rank 0 prints one
line: the settings, then us per all-reduce at each size.

  NCCL_NVLS_ENABLE=0 NCCL_PROTO=LL torchrun --standalone --nproc-per-node 2 scripts/allreduce_probe.py
  torchrun --standalone --nproc-per-node 2 scripts/allreduce_probe.py --device cpu   # gloo: the script runs

Keep NVLink multicast off (NCCL_NVLS_ENABLE=0 ...): the lent GPU hosts'
rule, which also rules out symmetric-memory all-reduces."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's qgemm_bench

CALLS = 160  # Llama-3-70B: two row-parallel projections in each of 80 layers
HIDDEN = 8192
BATCHES = (1, 16)
SETTINGS = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE")


def main(argv=None) -> int:
    from qgemm_bench.errors import InputError
    from qgemm_bench.harness.args import Parser, int_in

    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--reps", type=int_in(1, 100_000), default=20, help="graph replays timed (default 20)")
    try:
        args = p.parse_args(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist

    from qgemm_bench.harness import distributed
    from qgemm_bench.model.tensor_parallel import Shard, time_all_reduces

    world = distributed.from_env()
    if world is None:
        print("error: run it under torchrun (two or more ranks)", file=sys.stderr)
        return 2
    dev = torch.device(distributed.start(world, args.device, "nccl" if args.device == "cuda" else "gloo"))
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    shard = Shard(world.rank, world.size)
    us = [1e3 * time_all_reduces(CALLS, b * HIDDEN, dtype, dev, shard, args.reps) / CALLS for b in BATCHES]
    if world.rank == 0:
        env = " ".join(f"{k}={os.environ[k]}" for k in SETTINGS if k in os.environ) or "NCCL defaults"
        cells = ", ".join(f"batch {b} ({b * HIDDEN * dtype.itemsize // 1024} KiB) {u:.1f} us"
                          for b, u in zip(BATCHES, us, strict=True))
        print(f"{world.size} ranks, {env}: {cells} per all-reduce ({CALLS} in a graph)", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
