"""The parts every split-K kernel here shares (split_k.py, weight_only.py):
where a program's tile and K range are, and how the splits of a tile meet.

Splits meet in fp32 in one of two ways (DETERMINISTIC):
- atomics into a workspace tile (one [M, N] plane);
- each split stores its own partial (plane pid_k of SPLIT_K planes) and the
  sum is taken in a fixed order, so the result does not depend on which
  program finishes first.
A per-tile counter tells the last program of a tile to finish it: add the
bias (exactly once), cast, store, and zero the workspace and counter for the
next call. No memset or cast kernels: at 64x32768x64 the kernel floor is a
few microseconds and every extra launch costs ~1-2 us even in a CUDA graph.

Who sums the deterministic planes (REDUCE, split_k_configs.REDUCES; the
split-K GEMM's configs choose, other kernels take the default), each in a
fixed order, so the same bits every call:
- REDUCE_LAST (default): the tile's last program, plane after plane (split
  order);
- REDUCE_KERNEL: every program only stores its plane (no counter) and a
  second, small launch (reduce_planes) sums them per output element, over
  many programs (in split order, from SPREAD_PLANES planes in tl.sum's):
  faster at most long-K shapes on the H100. Two other sums in
  the last program were measured and dropped (CHUNK planes per load summed
  by tl.sum: slower; the loop unrolled: no faster). Measurements:
  docs/split_k.md, "Measurements behind the code's choices".
"""

from __future__ import annotations

import contextlib
import os

import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as tl_cuda

from qgemm_bench.backends.norm_parts import SUMSQ_CHUNK

# finish's REDUCE codes: indices into split_k_configs.REDUCES.
REDUCE_LAST, REDUCE_KERNEL = tl.constexpr(0), tl.constexpr(1)

# PDL 2's prefetch of a weight line to L2, as inline PTX (pdl_prologue; the
# Helion split-K kernel emits the same, helion_kernels/kernels.py).
PREFETCH_L2_ASM, PREFETCH_L2_CONSTRAINTS = "prefetch.global.L2 [$1]; // $0", "=r,l"
_PREFETCH_L2_ASM = tl.constexpr(PREFETCH_L2_ASM)  # a @triton.jit function reads globals only as constexpr
_PREFETCH_L2_CONSTRAINTS = tl.constexpr(PREFETCH_L2_CONSTRAINTS)

# The counters are sized for the smallest tile any config uses.
MIN_BLOCK_M, MIN_BLOCK_N = 16, 32


def check_workspace(planes: int, m: int, n: int) -> None:
    """ValueError unless `planes` fp32 [M, N] planes fit the kernels' int32
    element offsets (finish's plane index times M * N)."""
    if planes * m * n >= 2**31:
        raise ValueError(f"split-K workspace of {planes} planes of {m}x{n} has {planes * m * n} elements, over the "
                         "2^31 the kernels' int32 offsets reach; use fewer splits or a smaller output")


def counters(m: int, n: int) -> int:
    """How many per-tile counters a [M, N] output needs at the smallest tile."""
    return triton.cdiv(m, MIN_BLOCK_M) * triton.cdiv(n, MIN_BLOCK_N)


def workspace(cache: dict, m: int, n: int, device) -> tuple:
    """The fp32 [M, N] workspace and per-tile counters of an atomic split-K
    kernel at M (zeroed once, then left zeroed by every call), kept in
    `cache` by M."""
    if m not in cache:
        cache[m] = (torch.zeros(m * n, device=device, dtype=torch.float32),
                    torch.zeros(counters(m, n), device=device, dtype=torch.int32))
    return cache[m]


def grid(m: int, n: int, c: dict) -> tuple[int, int]:
    """The launch grid of a split kernel with config c: (tiles, SPLIT_K)."""
    return (triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"]), c["SPLIT_K"])


_CHAINED = 0  # depth of chained_pdl() contexts


@contextlib.contextmanager
def chained_pdl():
    """Our kernels' PDL for steps whose other kernels launch with PDL too
    (Inductor's triton.enable_pdl). A PDL kernel may read what any earlier
    kernel wrote only if every kernel between them released its dependents
    after its own wait; our PDL 1 and 2 release them before. Inductor 2.11
    and 2.13 make the kernel after an op of ours wait for all of it (after
    an extern kernel their scheduler has no previous node, so the wait goes
    before the first load), so PDL 1 and 2 would hold there too; inside,
    pdl_launch keeps to the rule instead of relying on that: a config with
    PDL runs the kernel's `chain` mode, 3 (the wait first, the next kernel
    released after the main loop) where the kernel has it, 0 where it does
    not, None: its own (docs/model.md)."""
    global _CHAINED
    _CHAINED += 1
    try:
        yield
    finally:
        _CHAINED -= 1


def chained() -> bool:
    """Whether a chained_pdl() context is open (a --pdl step is compiled or captured)."""
    return _CHAINED > 0


def pdl_launch(c: dict, device: torch.device, chain: int | None = 3) -> dict:
    """The launch keywords for config c's PDL (programmatic dependent launch):
    {"PDL": 0} where c has none, on CPU (the interpreter has no griddepcontrol)
    or with QGEMM_PDL=0 in the environment (to time without it); inside
    chained_pdl() the kernel's `chain` mode (there)."""
    pdl = c.get("PDL", 0)
    if _CHAINED and chain is not None:
        pdl = pdl and chain
    if not pdl or device.type != "cuda" or os.environ.get("QGEMM_PDL", "1") == "0":
        return {"PDL": 0}
    return {"PDL": pdl, "launch_pdl": True}


@triton.jit
def pdl_prologue(prefetch_ptrs, PDL: tl.constexpr):
    """Programmatic dependent launch (PDL 1, 2, 3; the launch's launch_pdl): let
    the next kernel be scheduled now (it starts once every program here has,
    and waits in its own prologue; PDL 3: after the main loop, pdl_release),
    with PDL 2 and 3 prefetch `prefetch_ptrs` to L2
    (weights, which no kernel before writes), then wait until the kernel
    before has finished. So a call's launch and first weight reads overlap
    the previous kernel's tail; everything a kernel before may write
    (activations, workspace, counters, outputs) is touched only after the
    wait. It pays at some shapes and not others (the next kernel's programs
    take SMs as they free, unevenly), so the tables choose it and its mode
    per shape (H100 measurements: docs/pdl.md)."""
    if PDL:
        if PDL != 3:  # 3: pdl_release launches the next kernel, after the main loop
            tl_cuda.gdc_launch_dependents()
        if PDL >= 2:
            tl.inline_asm_elementwise(_PREFETCH_L2_ASM, _PREFETCH_L2_CONSTRAINTS, [prefetch_ptrs], dtype=tl.int32,
                                      is_pure=False, pack=1)
        tl_cuda.gdc_wait()


@triton.jit
def pdl_release(PDL: tl.constexpr):
    """PDL 3: let the next kernel be scheduled only now, after this program's
    main loop (pdl_prologue waited and prefetched): its programs then take
    SMs as this kernel's finish rather than while it streams."""
    if PDL == 3:
        tl_cuda.gdc_launch_dependents()


@triton.jit
def tile_and_range(M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   SPLIT_K: tl.constexpr):
    """This program's output tile (flat index, row and column offsets) and its
    contiguous range [first, last) of K blocks. Grid: (tiles, SPLIT_K)."""
    pid_mn = tl.program_id(0)
    pid_k = tl.program_id(1)
    n_tiles = tl.cdiv(N, BLOCK_N)
    offs_m = (pid_mn // n_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (pid_mn % n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(blocks, SPLIT_K)
    first = pid_k * per_split
    last = tl.minimum(first + per_split, blocks)
    return pid_mn, offs_m, offs_n, first, last


_SUMSQ_CHUNK = tl.constexpr(SUMSQ_CHUNK)  # _store's RESIDUAL: the parts' layout (backends/norm_parts.py)


@triton.jit
def _store(total, out_ptr, stride_om, bias_ptr, offs_m, offs_n, M, N, HAS_BIAS: tl.constexpr,
           res_ptr, sq_ptr, RESIDUAL: tl.constexpr, nw_ptr, xw_ptr, NORM_W: tl.constexpr,
           sqin_ptr, K, eps, RMS_SCALE: tl.constexpr, SWIGLU_OUT: tl.constexpr = False):
    """The tile's output: the fp32 sum `total` (RMS_SCALE: times each row's
    1 / RMS of x, rsqrt(sum of squares / K + eps), the sums being the
    per-chunk ones at sqin_ptr [M, norm_parts.sumsq_chunks(K)] that the GEMM which wrote
    x left), plus the bias, cast. RESIDUAL: plus res (out's layout), added as
    torch adds two tensors of out's dtype; each row's fp32 sums of squares of
    the result per SUMSQ_CHUNK columns into sq_ptr [M, chunks] (plain stores:
    no zeroing, the same bits whoever finishes); NORM_W also the result times
    the norm weight at nw_ptr [N], cast, into xw_ptr (out's layout). Together:
    RMSNorm(h) @ w2 = (1 / RMS) (h * weight) @ w2, an RMSNorm between two
    GEMMs without a kernel of its own (docs/fused_gemm.md). SWIGLU_OUT: the
    columns are (gate, up) pairs and out [M, N // 2] takes silu(gate) * up,
    in fp32 from the cast pair and cast once, as Inductor's kernel on the
    stored gate_up output computes it (no RESIDUAL with it)."""
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask = mask_m[:, None] & mask_n[None, :]
    if RMS_SCALE:
        chunks_in = tl.cdiv(K, _SUMSQ_CHUNK)
        c = tl.arange(0, 64)
        ss = tl.zeros(offs_m.shape, dtype=tl.float32)
        for c0 in range(0, chunks_in, 64):
            ss += tl.sum(tl.load(sqin_ptr + offs_m[:, None] * chunks_in + (c0 + c)[None, :],
                                 mask=mask_m[:, None] & (c0 + c < chunks_in)[None, :], other=0.0), axis=1)
        total = total * tl.rsqrt(ss / K + eps)[:, None]
    if HAS_BIAS:
        total += tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    y = total.to(out_ptr.dtype.element_ty)
    if SWIGLU_OUT:
        tl.static_assert(not RESIDUAL, "SWIGLU_OUT takes no residual")
        BMS: tl.constexpr = y.shape[0]
        HALF: tl.constexpr = y.shape[1] // 2
        g, u = tl.split(tl.reshape(y.to(tl.float32), (BMS, HALF, 2)))
        offs_h = tl.min(offs_n, axis=0) // 2 + tl.arange(0, HALF)  # a tile's columns: contiguous, even-aligned
        tl.store(out_ptr + offs_m[:, None] * stride_om + offs_h[None, :],
                 (g * tl.sigmoid(g) * u).to(out_ptr.dtype.element_ty),
                 mask=mask_m[:, None] & (offs_h < N // 2)[None, :])
        return
    if RESIDUAL:
        res = tl.load(res_ptr + offs_m[:, None] * stride_om + offs_n[None, :], mask=mask, other=0.0)
        y = (y.to(tl.float32) + res.to(tl.float32)).to(out_ptr.dtype.element_ty)
        h = tl.where(mask, y.to(tl.float32), 0.0)
        BM: tl.constexpr = h.shape[0]
        tl.static_assert(h.shape[1] % _SUMSQ_CHUNK == 0, "RESIDUAL needs BLOCK_N a multiple of SUMSQ_CHUNK")
        CH: tl.constexpr = h.shape[1] // _SUMSQ_CHUNK
        sq = tl.sum(tl.reshape(h * h, (BM, CH, _SUMSQ_CHUNK)), axis=2)
        chunks = tl.cdiv(N, _SUMSQ_CHUNK)
        chunk = tl.min(offs_n, axis=0) // _SUMSQ_CHUNK + tl.arange(0, CH)  # a tile: contiguous, chunk-aligned
        tl.store(sq_ptr + offs_m[:, None] * chunks + chunk[None, :], sq,
                 mask=mask_m[:, None] & (chunk < chunks)[None, :])
        if NORM_W:
            nw = tl.load(nw_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
            tl.store(xw_ptr + offs_m[:, None] * stride_om + offs_n[None, :],
                     (h * nw[None, :]).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], y, mask=mask)


@triton.jit
def finish(acc, out_ptr, stride_om, ws_ptr, count_ptr, bias_ptr, pid_mn, offs_m, offs_n, M, N,
           SPLIT_K: tl.constexpr, DETERMINISTIC: tl.constexpr, HAS_BIAS: tl.constexpr,
           REDUCE: tl.constexpr = 0,  # REDUCE 0: REDUCE_LAST
           res_ptr=None, sq_ptr=None, RESIDUAL: tl.constexpr = False, nw_ptr=None, xw_ptr=None,
           NORM_W: tl.constexpr = False, sqin_ptr=None, K=0, eps=0.0, RMS_SCALE: tl.constexpr = False,
           SWIGLU_OUT: tl.constexpr = False):
    """Store this program's fp32 partial `acc`; the tile's last program adds
    the bias (and _store's other parts), stores the cast sum and leaves
    workspace and counter zeroed. DETERMINISTIC only: REDUCE (module doc);
    with REDUCE_KERNEL reduce_planes finishes (none of _store's parts there)."""
    mask_m = offs_m < M
    mask_n = offs_n < N
    tile = offs_m[:, None] * N + offs_n[None, :]  # workspace index within one [M, N] plane
    mask = mask_m[:, None] & mask_n[None, :]
    if SPLIT_K == 1:
        _store(acc, out_ptr, stride_om, bias_ptr, offs_m, offs_n, M, N, HAS_BIAS, res_ptr, sq_ptr, RESIDUAL,
               nw_ptr, xw_ptr, NORM_W, sqin_ptr, K, eps, RMS_SCALE, SWIGLU_OUT)
    elif DETERMINISTIC and REDUCE == REDUCE_KERNEL:  # reduce_planes, launched next, sums the planes
        tl.static_assert(not SWIGLU_OUT, "SWIGLU_OUT: reduce_planes stores the full N")
        tl.store(ws_ptr + tl.program_id(1) * M * N + tile, acc, mask=mask)
    else:
        if DETERMINISTIC:
            tl.store(ws_ptr + tl.program_id(1) * M * N + tile, acc, mask=mask)
        else:
            tl.atomic_add(ws_ptr + tile, acc, mask=mask, sem="relaxed")
        # Every thread's partial is issued before the counter (release); the
        # last program's reads come after it (acquire).
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + pid_mn, 1, sem="acq_rel")
        if done == SPLIT_K - 1:
            if DETERMINISTIC:
                total = tl.zeros(acc.shape, dtype=tl.float32)
                for s in range(0, SPLIT_K):
                    total += tl.load(ws_ptr + s * M * N + tile, mask=mask, other=0.0, cache_modifier=".cg")
            else:
                # Read the sum with an atomic (performed at L2, where the other
                # programs' atomics land): a .cg load read incomplete sums on
                # the H100 (docs/split_k.md).
                zero = tl.zeros(acc.shape, dtype=tl.float32)
                total = tl.atomic_add(ws_ptr + tile, zero, mask=mask, sem="acquire")
                # Masked-out lanes of the read are undefined: zero them before
                # RMS_SCALE's 1 / sqrt(eps) can take them past the cast's range.
                total = tl.where(mask, total, 0.0)
                tl.store(ws_ptr + tile, zero, mask=mask)
            _store(total, out_ptr, stride_om, bias_ptr, offs_m, offs_n, M, N, HAS_BIAS, res_ptr, sq_ptr, RESIDUAL,
                   nw_ptr, xw_ptr, NORM_W, sqin_ptr, K, eps, RMS_SCALE, SWIGLU_OUT)
            # Relaxed: nothing else touches the counter in this launch, and
            # the next launch is ordered after it anyway. The default acq_rel
            # fenced (MEMBAR.GPU) before the tile's last program could exit,
            # slower (H100: docs/split_k.md).
            tl.atomic_xchg(count_ptr + pid_mn, 0, sem="relaxed")


def reduce_block(m: int, n: int, sms: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of a plane sum over a [M, N] output that runs each
    element's planes in one thread (plane_launch below SPREAD_PLANES): blocks of 32..256
    elements, small enough for >= `sms` programs where the output allows (all
    SMs pull planes), at most 2 elements per thread (each thread has SPLIT_K
    loads to keep in flight)."""
    block = max(32, min(256, 1 << max(0, (m * n // sms).bit_length() - 1)))
    return block, min(4, block // 32)


# reduce_planes: from this many planes a program loads them as one tile
# spread over its threads (SPREAD), about PLANE_VALUES_PER_THREAD values a
# thread; below it each thread sums its elements' planes itself.
SPREAD_PLANES, PLANE_VALUES_PER_THREAD = 32, 16


def plane_launch(m: int, n: int, split: int, sms: int, spread: bool | None = None) -> tuple[tuple[int], dict]:
    """(grid, meta) of reduce_planes for a [M, N] output of `split` planes:
    reduce_block's elements per program; from SPREAD_PLANES planes on (or as
    `spread` forces, for scripts/reduce_sass.py), all of them loaded as one
    [PLANES, BLOCK] tile (PLANES: `split` to a power of two) over enough
    warps for about PLANE_VALUES_PER_THREAD values a thread."""
    block, warps = reduce_block(m, n, sms)
    planes = triton.next_power_of_2(split)
    spread = split >= SPREAD_PLANES if spread is None else spread
    if spread:  # at most 8 warps: fewer elements a program where the planes are many
        block = max(32, min(block, 8 * 32 * PLANE_VALUES_PER_THREAD // planes))
        warps = max(1, min(8, planes * block // (32 * PLANE_VALUES_PER_THREAD)))
    return (triton.cdiv(m * n, block),), {"BLOCK": block, "PLANES": planes, "SPREAD": spread, "num_warps": warps}


@triton.jit
def reduce_planes(ws_ptr, bias_ptr, out_ptr, M, N, SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                  BLOCK: tl.constexpr, PLANES: tl.constexpr, SPREAD: tl.constexpr, PDL: tl.constexpr = 0):
    """REDUCE_KERNEL's second launch: out (contiguous [M, N]) = the SPLIT_K
    fp32 planes summed per element, + bias, cast. Grid: cdiv(M * N, BLOCK);
    PLANES is SPLIT_K to a power of two (plane_launch). The planes need no
    zeroing: every call writes each.

    Without SPREAD each thread sums its elements' planes in split order
    (REDUCE_LAST's bits). With it (many planes) a program loads its
    elements' planes as one [PLANES, BLOCK] tile across its threads and
    sums them with tl.sum, in that tile's fixed order: one round trip of
    loads where a thread's own went out a few at a time (docs/split_k.md).
    Both give the same bits every call.
    PDL (the split kernel's): launched early, it waits for the split kernel
    before reading a plane (pdl_prologue without a prefetch)."""
    pdl_prologue(ws_ptr, PDL != 0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    if SPREAD:
        planes = tl.arange(0, PLANES)
        ptrs = ws_ptr + planes[:, None].to(tl.int64) * M * N + offs[None, :]
        total = tl.sum(tl.load(ptrs, mask=(planes[:, None] < SPLIT_K) & mask[None, :], other=0.0), axis=0)
    else:
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):  # unrolled: the loads are independent and can all be issued early
            total += tl.load(ws_ptr + s * M * N + offs, mask=mask, other=0.0)
    if HAS_BIAS:
        total += tl.load(bias_ptr + offs % N, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=mask)
