"""The Helion fused weight-only kernel's split-K (kernels.fused, split_k; the
fused path of helion_ops.WeightOnly, M 65..512): fused_gemm's SPLIT_K in
Helion, finished as the split path's kernel (workspace atomics, the tile's
last program stores and re-zeroes). On CPU under the Triton interpreter with
interpreter configs (fp16, no PTX decodes), against fp64 math on the
dequantized weights; the generated code's structure anywhere."""

import re

import pytest
import torch

from qgemm_bench.operators import int4_gemm, nvfp4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4, NVFP4
from tests.support import TOL, case, check, fp64, interpreter, run_backend, seed


def fused_config(split=None, bn=64, bm=32, bk=128) -> dict:
    """An interpreter config of the fused path (split None: no split_k key, as every config before it)."""
    cfg = {"block_sizes": [bn, bm], "block_k": bk, "decode_asm": False, "num_warps": 4, "num_stages": 1}
    if split is not None:
        cfg["split_k"] = split
    return cfg


def weight_only(op, shape, monkeypatch, cfg, inputs=None, **settings):
    """(helion_ops.WeightOnly on fresh random weights, or those of `inputs`,
    x, fp64 reference) with `cfg` as the fused path's interpreter config."""
    from qgemm_bench.backends import helion_ops

    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG", cfg)
    if inputs is None:
        inputs = op.make_inputs(case(op, shape, **settings), seed())
    if op is int4_gemm:
        gemm = helion_ops.WeightOnly("int4_gemm", inputs.w, inputs.scales, None, INT4, inputs.group_size)
    else:
        gemm = helion_ops.WeightOnly("nvfp4_gemm", inputs.w, inputs.block_scales.contiguous(), inputs.tensor_scale,
                                     NVFP4, None)
    assert gemm.path(shape[0]) == "fused"
    return gemm, inputs.x, fp64(inputs.x, op.dequantize(inputs))


def assert_left_zero(gemm, m: int, split: int) -> None:
    """The workspace and counters exist with a split only, and the call left them zero."""
    if split == 1:
        assert m not in gemm._workspace
        return
    ws, count = gemm._workspace[m]
    assert ws.shape == (m, gemm.n) and ws.dtype == torch.float32 and count.dtype == torch.int32
    assert float(ws.abs().sum()) == 0.0 and int(count.abs().sum()) == 0


# K blocks of 128: 640 -> 5 (splits 2, 3: uneven runs 3+2, 2+2+1), 1152 -> 9
# (split 2: 5+4; 3: three whole runs of 3); split 16 > the blocks: one block
# per program, fewer programs than splits. Group 128: BLOCK scales, 32: SUB.
INT4_CASES = [((65, 640, 72), 128), ((100, 1152, 72), 32)]
SPLITS = [1, 2, 3, 16]


@interpreter
@pytest.mark.parametrize("shape,group", INT4_CASES)
@pytest.mark.parametrize("split", SPLITS)
def test_int4_fused_split_vs_fp64(shape, group, split, monkeypatch):
    import helion

    from qgemm_bench.backends.helion_kernels import kernels, tuning

    gemm, x, ref = weight_only(int4_gemm, shape, monkeypatch, fused_config(split), group_size=group)
    out = gemm(x)
    check(out, ref)
    r = gemm.bound(x)
    assert r.config["split_k"] == split
    # The calls run the kernel ready() bound and compiled (split_k is its argument), split-K's where split > 1.
    assert kernels.fused.bind(gemm._fused_args(x, r.config)) is r.run
    code = r.run.to_triton_code(helion.Config(**{k: v for k, v in tuning.helion_settings(r.config).items()
                                                 if k != "split_k"}))
    assert ("tl.atomic_add(ws" in code) == (split > 1)
    assert_left_zero(gemm, shape[0], split)
    again = gemm(x)  # the workspace and counters were left ready
    check(again, ref)
    assert rel_error(again, out.double()) <= TOL[x.dtype]
    assert_left_zero(gemm, shape[0], split)


@interpreter
@pytest.mark.parametrize("shape,bk", [((100, 1152, 72), 128), ((65, 1040, 72), 64)])
@pytest.mark.parametrize("split", SPLITS)
def test_nvfp4_fused_split_vs_fp64(shape, bk, split, monkeypatch):
    # E4M3 block scales (SUB tiles loaded a step ahead, from each split's
    # first block) and the tensor scale on each partial; K = 1040 is off the
    # step of 64 (17 blocks, the last of 16 k: splits 9+8, 6+6+5, 8 x 2+1).
    gemm, x, ref = weight_only(nvfp4_gemm, shape, monkeypatch, fused_config(split, bk=bk))
    out = gemm(x)
    check(out, ref)
    assert_left_zero(gemm, shape[0], split)
    again = gemm(x)
    check(again, ref)
    assert rel_error(again, out.double()) <= TOL[x.dtype]
    assert_left_zero(gemm, shape[0], split)


@interpreter
@pytest.mark.parametrize("group,bk", [("channel", 128), (96, 64), (None, 128)])
def test_int4_fused_split_every_other_scale_mode(group, bk, monkeypatch):
    """CHANNEL (the scale on each partial), GATHER (96: per packed row), unscaled."""
    gemm, x, ref = weight_only(int4_gemm, (65, 1152, 200), monkeypatch, fused_config(3, bk=bk), group_size=group)
    check(gemm(x), ref)
    assert_left_zero(gemm, 65, 3)


@interpreter
def test_split_one_is_the_kernel_without_split_k(monkeypatch):
    """split_k 1 is exactly the kernel as before split_k: the same arguments
    (no workspace), the same bound kernel and generated code as a config
    without the key, bit-identical results; no atomics, a 2-D grid."""
    import helion

    from qgemm_bench.backends.helion_kernels import kernels, tuning

    shape = (130, 640, 200)  # M's bucket (256): Triton's default config does not split K
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, group_size=128), seed())
    gemm, x, ref = weight_only(int4_gemm, shape, monkeypatch, fused_config(None), inputs)
    out = gemm(x)
    check(out, ref)
    cfg = gemm.bound(x).config
    assert cfg["split_k"] == 1 and shape[0] not in gemm._workspace
    args = gemm._fused_args(x, cfg)
    assert len(args) == 10  # xt ... use_asm: the kernel's defaults for split_k, ws, count
    assert len(gemm._fused_args(x, {k: v for k, v in cfg.items() if k != "split_k"})) == 10
    bound = kernels.fused.bind(args)
    assert kernels.fused.bind((*args, 1, None, None)) is bound
    settings = helion.Config(**tuning.helion_settings({k: v for k, v in cfg.items() if k != "split_k"}))
    code = bound.to_triton_code(settings)
    device = code[code.index("@triton.jit"):code.index("\ndef fused(")]
    assert "atomic" not in device and "debug_barrier" not in device and "pid_2" not in device
    assert re.search(r"for offset_\d+ in tl\.range\(0, 320, ", device)  # over all of K (640 / 2 packed rows)

    gemm1, _, _ = weight_only(int4_gemm, shape, monkeypatch, fused_config(1), inputs)
    assert torch.equal(gemm1(x), out)
    assert gemm1.bound(x).config == cfg and shape[0] not in gemm1._workspace


def fused_code(k: int, bk: int, split: int, m: int = 256, n: int = 1024) -> str:
    """kernels.fused's generated Triton, bf16 with the PTX decodes (the GPU's), int4 group 128."""
    import helion

    x = torch.zeros(m, k, dtype=torch.bfloat16)
    s = torch.ones(k // 128, n, dtype=torch.bfloat16)
    args = (x.t(), torch.zeros(n, -(-k // 256) * 128, dtype=torch.uint8), s.t(), torch.ones(1), n, INT4, "block", 128,
            bk, True)
    if split > 1:
        args += (split, torch.zeros(m, n), torch.zeros(-(-m // 16), -(-n // 16), dtype=torch.int32))
    from qgemm_bench.backends.helion_kernels import kernels

    cfg = {"block_sizes": [64, 128], "num_warps": 8, "num_stages": 3}
    return kernels.fused.bind(args).to_triton_code(helion.Config(**cfg))


@pytest.mark.parametrize("k,split,whole", [(1152, 3, True), (1152, 2, False), (1152, 16, True), (1024, 4, True),
                                           (1024, 3, False)])
def test_split_code_is_one_launch_with_a_constant_trip_count_when_whole(k, split, whole):
    """What the H100 speed rests on, in the emitted Triton: one launch (no
    zeroing or cast kernels), the partials' atomics and the counter's
    acq_rel, finished by the tile's last program; where every split has the
    same number of K steps (fused_kernel's BLOCKS % SPLIT_K == 0, or fewer
    programs than splits) the K loop's bounds are constants (a runtime trip
    count had ptxas serialize the wgmmas), else each split's own range."""
    code = fused_code(k, 128, split)
    device, host = code[:code.index("\ndef fused(")], code[code.index("\ndef fused("):]
    assert host.count("_launcher(") == 1 and "torch.zeros" not in host and ".to(" not in host
    assert "tl.debug_barrier()" in device and "sem='acq_rel'" in device and "sem='acquire'" in device
    assert "tl.atomic_xchg(count" in device and device.count("tl.dot(") == 1
    loop = re.search(r"for offset_\d+ in tl\.range\((.*)\):", device).group(1)
    blocks = -(-k // 128)
    per = -(-blocks // split)
    assert whole == (blocks % per == 0)
    if whole:
        assert loop.startswith(f"0, {per * 64}, "), loop  # per * 64 packed rows, a constant
        # The weight tile at the split's first row plus the loop variable: no floor division.
        assert re.search(r"= offset_2 \+ offset_\d+\n", device)
    else:
        assert "tile_end" in loop, loop
    # Splits launched: cdiv(blocks, per) (no trailing empty programs).
    assert f"(({k // 2} + _BLOCK_SIZE_2 - 1) // _BLOCK_SIZE_2)" in host and f"_BLOCK_SIZE_2 = {per * 64}" in host


@interpreter
def test_triton_fused_config_with_a_split_runs_as_is(monkeypatch):
    """A fused Triton config with SPLIT_K (configs.from_triton(c, split=True),
    or helion_ops.helion_config: split_k only where it splits) reaches the
    kernel through the registered backend; a bad split_k refuses."""
    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels.configs import from_triton
    from qgemm_bench.backends.triton_kernels.fused_gemm import config

    c = config(32, 64, 128, 4, 4, 1, asm=False)
    assert helion_ops.helion_config(c, "fused") == from_triton(c, split=True) and from_triton(c, True)["split_k"] == 4
    assert "split_k" not in helion_ops.helion_config(config(32, 64, 128, 1, 4, 1), "fused")  # as before
    monkeypatch.setattr(helion_ops, "FUSED_INTERPRETER_CONFIG", from_triton(c, split=True))
    out, inputs, prepared = run_backend(int4_gemm, "helion", case(int4_gemm, (100, 1152, 200), group_size=32))
    check(out, fp64(inputs.x, int4_gemm.dequantize(inputs)))
    assert torch.equal(prepared.fn(), out) or rel_error(prepared.fn(), out.double()) <= TOL[out.dtype]
    for bad in (0, -2, 2.0, "2", True):
        gemm, x, _ = weight_only(int4_gemm, (65, 640, 200), monkeypatch, fused_config(bad), group_size=128)
        with pytest.raises(ValueError, match="split_k must be an integer >= 1"):
            gemm.bound(x)


@interpreter
def test_a_config_without_split_k_takes_the_default_s(monkeypatch):
    """As the argument keys (block_k, decode_asm): a config without split_k
    runs the default config's split (the Triton table's, once it has fused
    configs with splits); a Helion autotune keeps it too."""
    from qgemm_bench.backends import helion_ops

    real = helion_ops.default_config

    def default(fmt, path, *a, **kw):
        cfg, note = real(fmt, path, *a, **kw)
        return ({**cfg, "split_k": 2} if path == "fused" else cfg), note

    monkeypatch.setattr(helion_ops, "default_config", default)
    gemm, x, ref = weight_only(int4_gemm, (65, 640, 200), monkeypatch, fused_config(None), group_size=128)
    check(gemm(x), ref)
    assert gemm.bound(x).config["split_k"] == 2
    assert_left_zero(gemm, 65, 2)


@interpreter
@pytest.mark.parametrize("op", [int4_gemm, nvfp4_gemm])
@pytest.mark.parametrize("split", [1, 3])
def test_m1_runs_on_two_rows_of_x_without_padding_joins(op, split, monkeypatch):
    """At M = 1 Helion made the M tile one row wide and padded it to the
    dot's 16 by joins on x and the accumulator at every K step (NVFP4 M = 1
    ran twice its M = 16 on the H200). The fused path binds x as 2 rows
    (stride 0) and returns the first: right against fp64, and the code has
    no more joins than at M = 2."""
    import helion

    from qgemm_bench.backends import helion_ops
    from qgemm_bench.backends.helion_kernels import kernels, tuning

    monkeypatch.setattr(helion_ops.WeightOnly, "path", lambda self, m: "fused")
    cfg = fused_config(split, bm=16)
    gemm, x, ref = weight_only(op, (1, 640, 72), monkeypatch, cfg)
    out = gemm(x)
    assert out.shape == (1, 72)
    check(out, ref)
    check(gemm(x), ref)  # the workspace and counters were left ready

    def code(m):
        args = gemm._fused_args(torch.zeros(m, 640, dtype=x.dtype), gemm.bound(x).config)
        settings = {k: v for k, v in tuning.helion_settings(cfg).items() if k != "split_k"}
        return kernels.fused.bind(args).to_triton_code(helion.Config(**settings))

    one, two = code(1), code(2)
    assert "_BLOCK_SIZE_1 = tl.constexpr(1)" not in one
    assert one.count("tl.join") == two.count("tl.join")
