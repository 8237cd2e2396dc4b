"""scripts/ws_ab.py (GPU only) on CPU: its --tiles parse into the kernel's
WS configs, decode-size x tiles included; bad input ends in one line."""

import importlib.util
from pathlib import Path

import pytest

from qgemm_bench.errors import InputError

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ws_ab.py"


def load():
    spec = importlib.util.spec_from_file_location("ws_ab", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiles_parse_to_ws_configs_decode_sizes_included():
    ab = load()
    assert ab.parse_tiles("16x64x128s8+split2", 0) == {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128,
                                                      "num_stages": 8, "SPLITS": 2}
    assert ab.parse_tiles("32x128x128s6", 0)["BLOCK_M"] == 32
    with pytest.raises(InputError, match="BLOCK_M 16, 32, 64, 128, 256"):
        ab.parse_tiles("8x64x128s4", 0)


def test_triton_and_stamps_do_not_mix():
    with pytest.raises(InputError, match="--stamps: this checkout's kernel alone"):
        load().parse_args(["--shape", "1,8192,8192", "--tiles", "16x64x128s8+split2", "--stamps", "--triton"])
    args = load().parse_args(["--shape", "1,8192,8192", "--tiles", "16x64x128s8+split2", "--triton"])
    assert args.triton and args.configs[0]["BLOCK_M"] == 16
