"""scripts/ws_ab.py (GPU only) on CPU: its --tiles parse into the kernel's
WS configs, decode-size x tiles included; bad input ends in one line."""

import pytest

from qgemm_bench.errors import InputError
from tests.support import load_script


def load():
    return load_script("ws_ab")


def test_tiles_parse_to_ws_configs_decode_sizes_included():
    ab = load()
    assert ab.parse_tiles("16x64x128s8+split2", 0) == {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128,
                                                      "num_stages": 8, "SPLITS": 2}
    assert ab.parse_tiles("32x128x128s6", 0)["BLOCK_M"] == 32
    with pytest.raises(InputError, match="BLOCK_M 16, 32, 64, 128, 256"):
        ab.parse_tiles("8x64x128s4", 0)
    assert ab.parse_tiles("256x128x64s4+pdl", 0)["PDL"] == 1 and ab.parse_tiles("256x128x64s4+pdl2", 0)["PDL"] == 2
    for bad in ("256x128x64s4+pdl3", "256x128x64s4+sk+pdl2", "256x128x64s4+acc1"):
        with pytest.raises(InputError, match="--tiles"):
            ab.parse_tiles(bad, 0)


def test_triton_and_stamps_do_not_mix():
    with pytest.raises(InputError, match="--stamps: this checkout's kernel alone"):
        load().parse_args(["--shape", "1,8192,8192", "--tiles", "16x64x128s8+split2", "--stamps", "--triton"])
    args = load().parse_args(["--shape", "1,8192,8192", "--tiles", "16x64x128s8+split2", "--triton"])
    assert args.triton and args.configs[0]["BLOCK_M"] == 16


def test_triton_wrong_note_names_a_nan_error(monkeypatch):
    """--triton's checked calls: a NaN in any call is the error named (max()
    over [0, nan, ...] is 0: a WRONG line with an error under the tolerance)."""
    from types import SimpleNamespace

    import torch

    from qgemm_bench.backends import registry
    from qgemm_bench.backends.registry import Prepared

    ab = load()
    args = ab.parse_args(["--shape", "3,256,64", "--tiles", "64x64x128s4", "--triton", "--calls", "4"])
    args.l2_bytes = 0
    calls = []

    def prepare(case, inputs):
        def fn():  # the first call right, the rest NaN
            calls.append(1)
            out = inputs.x.float() @ torch.zeros(case.shape.K, case.shape.N)
            return out.to(inputs.x.dtype) if len(calls) == 1 else torch.full_like(out, float("nan"))
        return Prepared(fn)

    fake = SimpleNamespace(why_not=lambda case: None, prepare=prepare)
    monkeypatch.setattr(registry, "get", lambda op, name: fake)
    monkeypatch.setattr("qgemm_bench.operators.common.rel_error", lambda out, ref: float(out.float().abs().sum()))
    from qgemm_bench.backends.triton_kernels import ws_gemm

    fns, notes = ab.candidates(args, args.shapes[0], torch.device("cpu"), {ab.MAIN: ws_gemm})
    assert "triton (the run's)" not in fns
    (line,) = [n for n in notes if n.startswith("triton (the run's)")]
    assert "WRONG (error nan" in line, line
