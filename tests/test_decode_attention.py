"""The split-KV decode attention kernel (backends/triton_kernels/
decode_attention.py) against fp64 softmax attention over the same cache
slots: GQA groups of 1, 4 and 8, ragged cache lengths and positions
(position 0, mid-block, the last slot), one split, many, and splits past the
position left empty; the counters left zeroed for the next launch."""

import math

import pytest
import torch
import triton
import triton.language as tl

from qgemm_bench.backends.triton_kernels.decode_attention import prefetch_chunk_ids
from tests.support import DEV, DT, TOL, seed


def reference(q, k, v, pos: int, scale: float) -> torch.Tensor:
    """fp64 attention of q [B, H, D] over k, v [B, H_kv, L, D] slots 0..pos."""
    b, h, d = q.shape
    g = h // k.shape[1]
    kk = k[:, :, :pos + 1].double().repeat_interleave(g, dim=1)
    vv = v[:, :, :pos + 1].double().repeat_interleave(g, dim=1)
    p = torch.softmax(torch.einsum("bhd,bhld->bhl", q.double(), kk) * scale, dim=-1)
    return torch.einsum("bhl,bhld->bhd", p, vv)


def run(b, h, hkv, slots, d, pos, splits=None, block_n=16, dtype=DT, s=None, prefetch=None):
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    s = seed() if s is None else s
    g = torch.Generator().manual_seed(s)
    q, k, v = (torch.randn(*shape, generator=g).to(DEV, dtype)
               for shape in ((b, h, d), (b, hkv, slots, d), (b, hkv, slots, d)))
    k[:, :, pos + 1:] = 1e4  # slots past the position hold stale K/V that must not count
    scale = 1 / math.sqrt(d)
    out = kernel.decode_attention(q, k, v, torch.tensor([pos], device=DEV), scale, sms=8, block_n=block_n,
                                  splits=splits, prefetch=prefetch)
    ref = reference(q, k, v, pos, scale)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert out.shape == (b, h, d) and out.dtype == dtype
    assert err < TOL.get(dtype, 1e-5), f"seed {s}: rel err {err:.3g}"
    return out


# (B, H, H_kv, slots, D, pos, splits): GQA 4 (Llama-3-8B's), 8, MHA; position 0, mid-block, the last slot;
# splits None = splits_for (sms 8), one, more than the blocks (some past the position, empty).
@pytest.mark.parametrize("b,h,hkv,slots,d,pos,splits", [
    (1, 8, 2, 100, 32, 70, None), (2, 8, 2, 100, 32, 0, None), (2, 16, 2, 37, 64, 36, None),
    (1, 4, 4, 50, 16, 49, 1), (3, 8, 2, 64, 32, 20, 3), (1, 8, 1, 96, 32, 33, 6)])
def test_decode_attention_matches_fp64(b, h, hkv, slots, d, pos, splits):
    run(b, h, hkv, slots, d, pos, splits)


def test_a_pdl_step_s_launch_matches_fp64():
    """Inside a --pdl step (chained_pdl) the kernel launches with PDL on CUDA,
    waiting before its first load: still the fp64 answer."""
    from qgemm_bench.backends.triton_kernels import split_k_parts

    assert not split_k_parts.chained()
    with split_k_parts.chained_pdl():
        assert split_k_parts.chained()
        run(2, 8, 2, 100, 32, 70, splits=4)
    assert not split_k_parts.chained()


@pytest.mark.parametrize("splits", [1, 3])
def test_prefetching_programs_leave_the_answer_alone(splits):
    """With a prefetch table the launch gains grid rows of L2 prefetchers (on
    CUDA; the interpreter ignores the table): the attention is still fp64's,
    PDL or not, and the prefetched weights unchanged."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel
    from qgemm_bench.backends.triton_kernels import split_k_parts

    if DEV.type == "cuda" and not kernel.sm90(DEV):
        pytest.skip("the bulk L2 prefetch is sm_90's")
    w = [torch.randint(0, 255, (n,), dtype=torch.uint8, device=DEV) for n in (70_000, 4_100, 333)]
    before = [t.clone() for t in w]
    # 16-byte chunks: more than the prefetchers' lanes (16 programs x 128 at least), so their loop turns
    table = kernel.prefetch_table(w, 1 << 20, chunk=16)
    assert table.shape[0] - 1 > 16 * 128 * 2
    run(2, 8, 2, 100, 32, 70, splits=splits, prefetch=table)
    kernel.limit_prefetch(table, 16 * 777, evict_last=True)  # an odd count, the other policy
    with split_k_parts.chained_pdl():
        run(1, 8, 2, 100, 32, 99, splits=splits, prefetch=table)
    assert all(torch.equal(a, b) for a, b in zip(w, before, strict=True))


def test_prefetch_table_chunks_each_tensor_once_within_the_limit():
    from qgemm_bench.backends.triton_kernels.decode_attention import limit_prefetch, prefetch_table

    a = torch.empty(10_000, dtype=torch.float16)  # 20000 bytes
    b = torch.empty(3_000, dtype=torch.uint8)
    t = prefetch_table([a, b, a, torch.empty(0), torch.empty(8, 8).t(), None], 1 << 20, chunk=4096)
    assert t.dtype == torch.int64 and t.shape[1] == 2 and t[0, 0] == t.shape[0] - 1  # the header: every chunk
    addr, size = t[1:, 0].tolist(), t[1:, 1].tolist()
    assert all(x % 16 == 0 for x in addr) and all(0 < n <= 4096 and n % 16 == 0 for n in size)
    a_rows = [(x, n) for x, n in zip(addr, size, strict=True) if a.data_ptr() <= x < a.data_ptr() + 20_000]
    b_rows = [(x, n) for x, n in zip(addr, size, strict=True) if b.data_ptr() <= x < b.data_ptr() + 3_000]
    assert len(a_rows) + len(b_rows) == len(addr)  # a once, the empty and non-contiguous tensors left out
    assert a_rows[0][0] == a.data_ptr() and sum(n for _, n in a_rows) == 20_000  # 256-aligned allocations
    assert sum(n for _, n in b_rows) == 3_000 // 16 * 16
    capped = prefetch_table([a, b], 9_000, chunk=4096)
    assert capped.tolist() == [[3, 0], [a.data_ptr(), 4096], [a.data_ptr() + 4096, 4096],
                               [a.data_ptr() + 8192, 800]]  # the limit, in a's bytes first
    assert prefetch_table([a], 0).tolist() == [[0, 0]]
    for bad in (24, 8, 1 << 20):  # not 16-byte units, or past the instruction's size field
        with pytest.raises(ValueError, match="a multiple of 16"):
            prefetch_table([a], 1 << 20, chunk=bad)
    # lowered and restored in place (a captured graph reads the header at each replay)
    assert limit_prefetch(t, 8192) == 8192 and t[0, 0] == 2 and t[1:, 1].tolist() == size
    assert limit_prefetch(t, 0) == 0 and t[0, 0] == 0
    assert limit_prefetch(t, 1 << 20) == sum(size) and t[0, 0] == len(size) and t[0, 1] == 0  # normal policy
    assert limit_prefetch(t, 1 << 20, evict_last=True) == sum(size) and t[0, 1] == 1
    assert limit_prefetch(t, 1 << 20) == sum(size) and t[0, 1] == 1  # kept unless given
    assert limit_prefetch(t, 1 << 20, evict_last=False) == sum(size) and t[0, 1] == 0


@triton.jit
def _chunk_ids(out_ptr, live_ptr, chunks, programs, bases, LANES: tl.constexpr):
    """prefetch_chunk_ids of each program at each base, stored with their liveness."""
    program = tl.program_id(0)
    for i in range(0, bases):
        c, live = prefetch_chunk_ids(i * programs * LANES, program, programs, chunks, LANES)
        at = (program * bases + i) * LANES + tl.arange(0, LANES)
        tl.store(out_ptr + at, c)
        tl.store(live_ptr + at, live.to(tl.int32))


@pytest.mark.parametrize("chunks, programs", [(0, 16), (5, 16), (16 * 8, 16), (16 * 8 * 3 + 7, 16), (1000, 50)])
def test_the_prefetchers_take_every_chunk_once(chunks, programs):
    """prefetch_chunk_ids over every program, lane and base: each chunk
    below the count exactly once, the lanes past it marked not live."""
    lanes = 8
    bases = max(1, -(-chunks // (programs * lanes)))
    out = torch.full((programs * bases * lanes,), -1, dtype=torch.int64, device=DEV)
    live = torch.zeros(programs * bases * lanes, dtype=torch.int32, device=DEV)
    _chunk_ids[(programs,)](out, live, chunks, programs, bases, LANES=lanes)
    taken = out[live.bool()].tolist()
    assert sorted(taken) == list(range(chunks))  # each once
    assert all(c >= chunks for c in out[~live.bool()].tolist())


def test_prefetch_rows_fill_the_idle_sms_with_16_programs_at_least():
    from qgemm_bench.backends.triton_kernels.decode_attention import PREFETCH_PROGRAMS, prefetch_rows

    assert PREFETCH_PROGRAMS == 16
    assert prefetch_rows(132, 8, 10) == 5  # 8B batch 1: 80 attention programs, 50 prefetchers
    assert prefetch_rows(132, 128, 2) == 8  # batch 16: no SM idle, 16 programs
    assert prefetch_rows(132, 4, 1) == 128 and prefetch_rows(8, 8, 3) == 6
    assert all(prefetch_rows(s, p, k) * k >= 16 for s in (8, 132) for p in (1, 8, 128) for k in (1, 3, 17))


def test_more_pairs_than_a_launch_takes_are_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    q, k = torch.zeros(70_000, 1, 16, device=DEV, dtype=DT), torch.zeros(70_000, 1, 1, 16, device=DEV, dtype=DT)
    with pytest.raises(ValueError, match="more pairs than a launch takes"):
        kernel.decode_attention(q, k, k, torch.tensor([0], device=DEV), 0.1, sms=8)


def test_a_bad_prefetch_table_is_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    if DEV.type != "cuda":
        pytest.skip("the interpreter ignores the table")
    q, k = torch.zeros(1, 8, 32, device=DEV, dtype=DT), torch.zeros(1, 2, 40, 32, device=DEV, dtype=DT)
    for bad in (torch.zeros(4, 2, dtype=torch.int32, device=DEV), torch.zeros(4, 3, dtype=torch.int64, device=DEV),
                torch.zeros(4, 2, dtype=torch.int64)):
        with pytest.raises(ValueError, match="prefetch_table"):
            kernel.decode_attention(q, k, k, torch.tensor([3], device=DEV), 0.1, sms=8, prefetch=bad)


def test_float32_operands_keep_float32():
    """A float32 model's attention: the dots in IEEE float32, not TF32."""
    run(2, 8, 2, 90, 32, 77, splits=3, dtype=torch.float32)


def test_counters_are_left_zeroed_and_a_second_launch_agrees():
    """The merge's counters live across launches (a CUDA graph replays them):
    each launch's last programs zero them, so the next launch merges right."""
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    s = seed()
    a = run(2, 8, 2, 80, 32, 61, splits=4, s=s)
    assert all(int(c.abs().sum()) == 0 for _, _, c in kernel._WORKSPACES.values())
    assert torch.equal(run(2, 8, 2, 80, 32, 61, splits=4, s=s), a)


@pytest.mark.parametrize("bad, says", [
    (dict(k=(1, 3, 40, 32)), "query heads over 3 KV heads"), (dict(d=24), "power of two"),
    (dict(v=(1, 2, 41, 32)), "must be [B, H_kv, L, 32]"), (dict(pos=[1, 2]), "1-element")])
def test_bad_operands_are_refused(bad, says):
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    d = bad.get("d", 32)
    q = torch.zeros(1, 8, d, device=DEV, dtype=DT)
    k = torch.zeros(*bad.get("k", (1, 2, 40, d)), device=DEV, dtype=DT)
    v = torch.zeros(*bad.get("v", k.shape), device=DEV, dtype=DT)
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        kernel.decode_attention(q, k, v, torch.tensor(bad.get("pos", [3]), device=DEV), 0.1, sms=8)


@pytest.mark.skipif(DEV.type == "cuda", reason="the interpreter's limit")
def test_bfloat16_on_the_interpreter_is_refused():
    from qgemm_bench.backends.triton_kernels import decode_attention as kernel

    q, k = torch.zeros(1, 8, 32, dtype=torch.bfloat16), torch.zeros(1, 2, 40, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="no bfloat16"):
        kernel.decode_attention(q, k, k, torch.tensor([3]), 0.1, sms=8)


def test_splits_fill_the_sms_with_a_block_each_at_least():
    from qgemm_bench.backends.triton_kernels.decode_attention import splits_for

    assert splits_for(1, 8, 640, 132, 64) == 10  # 17 wanted, 10 blocks of slots
    assert splits_for(1, 8, 4096, 132, 64) == 17
    assert splits_for(16, 8, 4096, 132, 64) == 2 and splits_for(64, 8, 4096, 132, 64) == 1
