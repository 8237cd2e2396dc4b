"""Faults during a run: a lost CUDA context (faked on CPU with the error
message CUDA gives), a shape too large for the device, allocation failures.
A stdout that cannot be written (full, ASCII-only, closed). (A disk filling
while outputs are written: test_outputs.py, test_interrupts.py.)"""

import errno
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import runner
from qgemm_bench.backends.registry import Backend, Prepared
from qgemm_bench.errors import one_line
from qgemm_bench.harness import capacity, faults
from qgemm_bench.operators import int4_gemm
from tests.support import extra_backends

REPO = Path(__file__).resolve().parent.parent
ILLEGAL = ("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously "
           "reported at some other API call")


def correct(case, inputs):
    y = int4_gemm.reference(inputs).to(case.dtype)
    return Prepared(lambda: y.clone())


def read(out: Path):
    doc = json.loads((out / "results.json").read_text())
    return doc["metadata"], {(r["backend"], r["M"]): r for r in doc["rows"]}


@pytest.mark.parametrize("message", [ILLEGAL, "CUDA error: device-side assert triggered",
                                     "Triton Error [CUDA]: unspecified launch failure"])
def test_a_lost_cuda_context_stops_the_sweep_and_skips_the_rest(tmp_path, monkeypatch, capsys, message):
    calls = []

    def poison(case, inputs):
        calls.append(case.shape.M)
        if case.shape.M == 3:
            raise RuntimeError(message)
        return correct(case, inputs)

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "poison", "fails at M=3", poison),
                                             Backend("int4_gemm", "after", "correct", correct)])
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "poison,after", "--shape", "1,128,64", "--shape",
                        "3,256,40", "--shape", "5,256,37", "--rep", "1", "--warmup", "0", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    lost = f"the CUDA context was lost after poison at 3x256x40 (RuntimeError: {message.splitlines()[0]})"
    assert f"error: the run stopped early: {lost}; 4 (shape, backend) not run" in err
    assert calls == [1, 3]  # nothing ran after the failure
    meta, rows = read(out)
    assert meta["interrupted"] is True and meta["stopped"] == lost
    assert [rows[(b, 1)]["status"] for b in ("torch", "poison", "after")] == ["ok", "ok", "ok"]
    assert rows[("torch", 3)]["status"] == "ok" and rows[("poison", 3)]["status"] == "error"
    for key in [("after", 3), ("torch", 5), ("poison", 5), ("after", 5)]:
        assert rows[key]["status"] == "skipped" and rows[key]["reason"] == f"not run: {lost}", key
    assert len(rows) == 9 and len((out / "rows.jsonl").read_text().splitlines()) == 9
    assert "skipped" in (out / "report.md").read_text()


def test_rounds_measured_before_the_context_was_lost_are_kept(tmp_path, monkeypatch, capsys):
    n = {"calls": 0}

    def second_round_fails(case, inputs):
        n["calls"] += 1
        if n["calls"] == 2:
            raise RuntimeError(ILLEGAL)
        return correct(case, inputs)

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "poison", "fails in round 2", second_round_fails),
                                             Backend("int4_gemm", "after", "correct", correct)])
    out = tmp_path / "run"
    # Rounds: [torch, poison, after], then [after, poison, torch] (sweep.round_order).
    code = runner.main(["--op", "int4_gemm", "--backends", "poison,after", "--shape", "1,128,64", "--repeats", "2",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--output-dir", str(out)])
    assert code == 1
    _, rows = read(out)
    assert rows[("after", 1)]["status"] == "ok" and len(rows[("after", 1)]["round_p50_us"]) == 2
    assert rows[("poison", 1)]["status"] == "error"  # one failed round taints the row
    assert rows[("torch", 1)]["status"] == "ok" and rows[("torch", 1)]["round_p50_us"] == []  # the first round only


def test_an_ordinary_error_does_not_stop_the_sweep():
    assert not faults.context_lost(RuntimeError("CompilationError: at 3:4: bad config"))
    wrapped = RuntimeError("triton launch failed")
    wrapped.__cause__ = RuntimeError("CUDA error: misaligned address")
    assert faults.context_lost(wrapped)


@pytest.mark.parametrize("error,line", [
    (RuntimeError("kernel exploded\nat line 3"), "RuntimeError: kernel exploded"),
    (KeyError("BLOCK_M"), "KeyError: 'BLOCK_M'"),
    (ValueError(""), "ValueError"),
    # Inductor's wrapper announces its cause; the row says the cause (torch 2.11, flex decode on an H200).
    (RuntimeError("SubprocException: An exception occurred in a subprocess:\n\nName=triton_tem_fused_8\n"
                  "triton.compiler.errors.CompilationError: at 78:24:\n    tmp3 = tl.full([XBLOCK], 0)\n"
                  "NameError('XBLOCK is not defined')\n\nThe above exception was the direct cause:"),
     "RuntimeError: SubprocException: An exception occurred in a subprocess: NameError('XBLOCK is not defined')"),
    (RuntimeError("failed:\n  no error line here"), "RuntimeError: failed: no error line here"),
    (RuntimeError("x" * 500), "RuntimeError: " + "x" * 283 + "..."),
])
def test_a_failure_is_one_line_that_names_its_cause(error, line):
    assert one_line(error) == line and len(one_line(error)) <= 300


@pytest.mark.parametrize("error,status", [
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                  "you tried to allocate 100000000000000 bytes. Error code 12 (Cannot allocate memory)"), "oom"),
    (MemoryError(), "oom"),
    (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (RuntimeError("kernel exploded"), "error"),
])
def test_allocation_failures_are_oom_rows(error, status):
    assert faults.status(error) == status


def test_a_shape_too_large_for_free_memory_is_an_oom_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    made = []
    real_make = int4_gemm.make_inputs

    def make_inputs(case, seed):
        made.append(case.shape.M)
        return real_make(case, seed)

    monkeypatch.setattr(int4_gemm, "make_inputs", make_inputs)
    # 17x384x96 needs ~330 KB for inputs and reference, 1x128x64 ~75 KB.
    monkeypatch.setattr(capacity, "free_bytes", lambda device: 200_000)
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "cublas", "--shape", "17,384,96", "--shape", "1,128,64",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--output-dir", str(out)])
    assert code == 0
    assert made == [1]  # nothing was allocated for the large shape
    _, rows = read(out)
    for b in ("torch", "cublas"):
        big = rows[(b, 17)]
        assert big["status"] == "oom" and big["reason"].startswith("too large: 17x384x96 needs about")
        assert "cpu has 0.000186 GiB free; not run" in big["reason"]
        assert rows[(b, 1)]["status"] == "ok"


def test_working_bytes_cover_what_making_inputs_allocates():
    from qgemm_bench.types import Case, Shape

    shape = Shape(17, 384, 96)
    need = capacity.working_bytes(int4_gemm, shape, torch.float16, int4_gemm.Settings())
    case = Case("int4_gemm", shape, torch.float16, torch.device("cpu"), int4_gemm.Settings())
    inputs = int4_gemm.make_inputs(case, 0)
    ref = int4_gemm.reference(inputs)
    kept = sum(t.numel() * t.element_size() for t in inputs.tensors()) + ref.numel() * ref.element_size()
    assert kept < need < 10 * kept


def test_time_rounds_drops_a_candidate_whose_timing_fails_and_keeps_timing_the_rest():
    # sweep.time_rounds (path_ab.py, ws_ab.py): [a, b, c], then [c, b, a]; b fails in round 2 and is not
    # timed again; the others keep every round.
    from qgemm_bench.harness.sweep import time_rounds

    order = []

    def time_one(k):
        order.append(k)
        if k == "b" and len(order) > 3:
            raise RuntimeError("launch failed\nmore")
        return len(order)

    times, notes = time_rounds(["a", "b", "c"], 3, time_one)
    assert order == ["a", "b", "c", "c", "b", "a", "a", "c"]
    assert times == {"a": [1, 6, 7], "c": [3, 4, 8]}
    assert notes == ["b: timing failed in round 2: RuntimeError: launch failed"]


def test_time_rounds_ends_on_a_lost_context_naming_what_it_timed():
    # fatal (by default): a sticky CUDA error is the run's, re-raised with the label and round; the A/B
    # scripts end on it in one line (sweep.lost_context_line), any other error is not theirs to word.
    from qgemm_bench.harness.sweep import lost_context_line, time_rounds

    def time_one(k):
        if k == "c":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return 1.0

    with pytest.raises(RuntimeError) as lost:
        time_rounds(["a", "b", "c"], 2, time_one)
    line = lost_context_line(lost.value)
    assert line.startswith("the CUDA context was lost while timing c in round 1: RuntimeError: CUDA error: an "
                           "illegal memory access"), line
    assert lost_context_line(RuntimeError("CUDA error: an illegal memory access")).startswith(
        "the CUDA context was lost outside the timing rounds: ")
    assert lost_context_line(ValueError("bad config")) is None


class FullDevice(io.RawIOBase):
    """A stdout like /dev/full: every write fails with ENOSPC."""

    def writable(self):
        return True

    def write(self, b):
        raise OSError(errno.ENOSPC, "No space left on device")


RUN = ["--op", "int4_gemm", "--backends", "cublas", "--shape", "1,128,64", "--rep", "1", "--warmup", "0",
       "--no-plots"]


def test_a_full_stdout_costs_the_printed_text_not_the_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(FullDevice()), encoding="utf-8"))
    out = tmp_path / "run"
    code = runner.main([*RUN, "--output-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1] == ("error: could not write to stdout (No space left on device): what was printed "
                                     "there is lost (a run's files are written all the same)"), err
    assert not any("Traceback" in line for line in err)
    _, rows = read(out)
    assert len(rows) == 2 and (out / "report.md").is_file()


def test_an_ascii_stdout_escapes_a_non_ascii_path(tmp_path, monkeypatch, capsys):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    out = tmp_path / "résultats"
    code = runner.main([*RUN, "--output-dir", str(out)])
    sys.stdout.flush()
    assert code == 0 and capsys.readouterr().err.count("error") == 0
    assert f"results: {tmp_path}/r\\xe9sultats".encode() in raw.getvalue()
    assert len(read(out)[1]) == 2


def test_a_closed_pipe_changes_nothing(monkeypatch, capsys):
    class Closed(FullDevice):
        def write(self, b):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(Closed()), encoding="utf-8"))
    assert runner.main(["--list-ops"]) == 0  # `runner.py --list-ops | head -1`: the reader chose to stop
    assert capsys.readouterr().err == ""


def test_stdout_to_dev_full_in_a_real_process():
    """The interpreter's own flush at exit must not print 'Exception ignored' either."""
    r = subprocess.run(f"{sys.executable} runner.py --list-ops > /dev/full", shell=True, cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "error: could not write to stdout (No space left on device): what was printed there is lost (a run's "
        "files are written all the same)"], r.stderr


def test_each_shape_frees_its_cycles_and_the_sweep_unfreezes_what_it_froze(tmp_path, monkeypatch):
    """capacity.free (after each shape) collects, then freezes the survivors (a full collection
    scanned every module and kernel, 0.33 s a shape): a cycle dropped within
    a shape is freed with it; one kept past its shape is frozen and freed
    after the run."""
    import gc
    import weakref

    class Cycle:
        def __init__(self):
            self.me, self.data = self, torch.zeros(1024)

    seen, kept = {}, []

    def cyclic(case, inputs):
        m = case.shape.M
        if m == 1:
            c = Cycle()
            seen["dropped"] = weakref.ref(c)  # unreferenced once this shape ends
            kept.append(Cycle())
            seen["kept"] = weakref.ref(kept[0])  # survives shape 1 and is frozen there
        else:
            seen["dropped_alive_at_3"] = seen["dropped"]() is not None
            seen["frozen_at_3"] = gc.get_freeze_count()
            kept.clear()  # garbage from here, in the frozen generation
        return correct(case, inputs)

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "cyclic", "makes cycles", cyclic)])
    assert gc.get_freeze_count() == 0
    code = runner.main(["--op", "int4_gemm", "--backends", "cyclic", "--shape", "1,128,64", "--shape", "3,128,64",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--output-dir", str(tmp_path / "run")])
    assert code == 0
    assert seen["dropped_alive_at_3"] is False and seen["frozen_at_3"] > 0
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert seen["kept"]() is None


def test_a_callers_frozen_objects_stay_frozen(tmp_path):
    """The sweep unfreezes what it froze only where nothing was frozen before it."""
    import gc

    gc.freeze()
    try:
        before = gc.get_freeze_count()
        assert runner.main(["--op", "int4_gemm", "--backends", "torch", "--shape", "1,128,64", "--rep", "1",
                            "--warmup", "0", "--no-plots", "--output-dir", str(tmp_path / "run")]) == 0
        assert gc.get_freeze_count() >= before > 0
    finally:
        gc.unfreeze()
