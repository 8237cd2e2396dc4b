"""scripts/allreduce_probe.py on CPU (gloo, two ranks): rank 0 prints one
line with the NCCL settings it ran under and a time per all-reduce at
each size; alone it ends in one line and exit 2."""

import contextlib
import io
import os
from pathlib import Path

import torch.multiprocessing as mp

from tests.support import free_port, load_script


def load():
    return load_script("allreduce_probe")


def _rank(rank: int, port: int, out: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), NCCL_PROTO="LL")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert load().main(["--device", "cpu", "--reps", "1"]) == 0
    Path(f"{out}.{rank}").write_text(buf.getvalue())


def test_two_ranks_print_one_line_with_their_settings(tmp_path):
    mp.spawn(_rank, args=(free_port(), str(tmp_path / "out")), nprocs=2, join=True)
    line = (tmp_path / "out.0").read_text()
    assert line.startswith("2 ranks, NCCL_PROTO=LL: batch 1 (") and "batch 16 (" in line, line
    assert line.count(" us") == 2 and (tmp_path / "out.1").read_text() == ""


def test_alone_it_says_to_run_it_under_torchrun(capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert load().main(["--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == "error: run it under torchrun (two or more ranks)"


def test_bad_reps_end_in_one_line(capsys, monkeypatch):
    """--reps 0 divides by zero after the all-reduces (a traceback on every
    rank): refused first, in one line, exit 2, under torchrun or not."""
    monkeypatch.setenv("WORLD_SIZE", "2")  # as under torchrun: refused before the process group
    assert load().main(["--device", "cpu", "--reps", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: argument --reps: '0' is out of range") and "\n" not in err, err
