"""The read floor: how long this GPU takes, timed the way the runner times (a
CUDA graph over rotating copies > 2x L2), to do nothing but read a shape's
bytes once, and to launch an empty kernel. A kernel that must read those
bytes cannot beat the first; every kernel in a graph pays the second.

The copy-bandwidth floor in the reports (bytes / copy GB/s) leaves out the
launch and the ramp of a kernel that reads a few MiB: on the H100 a pure
read of 8 MiB took 4.6 us against 2.8 us of bytes / copy bandwidth
(results/h100/split_k_gemm/read_floor.md). scripts/read_floor.py tabulates
both per shape.

The reader is the best of a few plain streaming kernels (READERS): each
program sums its 16-byte-per-thread loads (int32 words, so any dtype) and
stores one word, which read_sums() checks against torch: a reader that
skipped bytes would report a floor it did not earn.
"""

from __future__ import annotations

import math
import statistics

import torch
import triton
import triton.language as tl

WORD = 4  # bytes: the reader loads int32 words
# (num_warps, UNROLL, PERSISTENT programs per SM or 0: one chunk per program).
# One-chunk programs stream like a memcpy; the persistent ones keep every SM
# loaded through the tail. The best of them per shape is the floor.
READERS = [(4, 4, 0), (8, 4, 0), (4, 8, 0), (8, 8, 0), (8, 4, 4), (8, 4, 8), (4, 8, 16)]


@triton.jit
def read_kernel(src_ptr, out_ptr, n_words, BLOCK: tl.constexpr, UNROLL: tl.constexpr, PERSISTENT: tl.constexpr):
    """out[pid] = the int32 (wrapping) sum of the words this program read.
    One chunk of UNROLL x BLOCK words per program, or (PERSISTENT) chunks
    strided by the grid; the UNROLL loads are independent, so all issue
    before the first returns."""
    pid = tl.program_id(0)
    chunk = BLOCK * UNROLL
    total = tl.zeros((BLOCK,), dtype=tl.int32)
    step = tl.num_programs(0) * chunk if PERSISTENT else n_words + chunk
    for start in range(pid * chunk, n_words, step):
        for u in tl.static_range(UNROLL):
            offs = start + u * BLOCK + tl.arange(0, BLOCK)
            total += tl.load(src_ptr + offs, mask=offs < n_words, other=0)
    tl.store(out_ptr + pid, tl.sum(total))


@triton.jit
def empty_kernel(out_ptr):
    """Launched to time a launch: stores nothing."""
    pass


def words_for(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / WORD))


def grid_of(n_words: int, reader: tuple, sms: int) -> int:
    warps, unroll, per_sm = reader
    chunks = triton.cdiv(n_words, warps * 32 * 4 * unroll)
    return min(chunks, per_sm * sms) if per_sm else chunks


def read(src: torch.Tensor, out: torch.Tensor, reader: tuple, sms: int) -> None:
    """One read of int32 tensor src with `reader`; out needs grid_of() words."""
    warps, unroll, per_sm = reader
    n = src.numel()
    if n >= 2**31 - 2 * warps * 32 * 4 * unroll:  # the kernel's offsets are int32
        raise ValueError(f"read_floor reads up to 2**31 words (8 GiB); got {n}")
    read_kernel[(grid_of(n, reader, sms),)](src, out, n, warps * 32 * 4, unroll, per_sm > 0, num_warps=warps)


def read_sums(src: torch.Tensor, reader: tuple, sms: int) -> tuple[int, int]:
    """(the reader's sum of src's words, torch's), both mod 2**32."""
    out = torch.zeros(grid_of(src.numel(), reader, sms), dtype=torch.int32, device=src.device)
    read(src, out, reader, sms)
    return int(out.to(torch.int64).sum()) % 2**32, int(src.to(torch.int64).sum()) % 2**32


def measure(nbytes: int, device: torch.device, warmup_ms: float = 10.0, rep_ms: float = 40.0) -> dict:
    """GPU: p50 us of the best reader over `nbytes` bytes (and which, with its
    checksum checked), and of an empty launch, both under graph timing."""
    from qgemm_bench.harness.measure import copies_for
    from qgemm_bench.harness.timing import time_graph

    props = torch.cuda.get_device_properties(device)
    n = words_for(nbytes)
    srcs = [torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, device=device)
            for _ in range(copies_for(n * WORD, n * WORD, props.L2_cache_size, device))]
    out = torch.empty(max(grid_of(n, r, props.multi_processor_count) for r in READERS), dtype=torch.int32,
                      device=device)
    best = None
    for r in READERS:
        got, want = read_sums(srcs[0], r, props.multi_processor_count)
        if got != want:
            raise RuntimeError(f"reader {r} summed {got}, torch {want}: it did not read every word")
        fns = [lambda s=s, r=r: read(s, out, r, props.multi_processor_count) for s in srcs]
        us = statistics.median(time_graph(fns, warmup_ms, rep_ms).samples_us)
        if best is None or us < best[0]:
            best = (us, r)
    empty = statistics.median(time_graph([lambda: empty_kernel[(props.multi_processor_count,)](out)],
                                         warmup_ms, rep_ms).samples_us)
    return {"bytes": nbytes, "read_us": best[0], "reader": list(best[1]), "empty_us": empty,
            "read_GBps": nbytes / best[0] / 1e3, "copies": len(srcs)}
