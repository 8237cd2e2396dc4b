"""Real signals and kills sent to a runner in a child process (tests/child_run.py):
Ctrl-C and SIGTERM keep every measured row and write the tables; kill -9 loses
at most the measurement in flight and `runner.py report DIR` rebuilds the
rest; a second Ctrl-C while writing waits; Ctrl-C during imports is one line."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner

REPO = Path(__file__).resolve().parent.parent
CHILD = REPO / "tests" / "child_run.py"
# Two smoke shapes, the baseline and the fake backend, a quick timing.
RUN = ["--op", "int4_gemm", "--backends", "fake", "--shape", "1,128,64", "--shape", "3,256,40",
       "--rep", "1", "--warmup", "0"]


def start(spec: dict, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), json.dumps(spec), *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited {proc.returncode} before {path.name}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {path.name}")
        time.sleep(0.02)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]


def report(folder: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "runner.py"), "report", str(folder), *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                           (signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                           (signal.SIGHUP, 129, "terminated (SIGHUP)")])  # a closed terminal
def test_sigint_and_sigterm_keep_rows_and_write_the_tables(tmp_path, capsys, sig, code, word):
    out, marker = tmp_path / "run", tmp_path / "waiting"
    proc = start({"wait_on": 2, "marker": str(marker)}, *RUN, "--output-dir", str(out))
    wait_for(marker, proc)  # in the fake backend's prepare at the second shape
    proc.send_signal(sig)
    rc, stdout, stderr = finish(proc)
    assert rc == code, stderr
    assert "Traceback" not in stderr and f"{word}: 3 row(s) kept" in stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["metadata"]["interrupted"] is True and doc["metadata"]["stopped"] == word
    assert [(r["backend"], r["M"], r["status"]) for r in doc["rows"]] == \
        [("torch", 1, "ok"), ("fake", 1, "ok"), ("torch", 3, "ok")]
    assert (out / "report.md").exists() and (out / "latency.png").exists()
    assert "Stopped early" in (out / "report.md").read_text()
    # compare takes the partial run (the run it is compared with decides the verdict); here, in this
    # process: what is tested is the folder the child left (test_compare runs compare as a process).
    capsys.readouterr()
    rc = runner.main(["compare", str(out), str(out), "--format", "text"])
    printed = capsys.readouterr()
    assert rc == 0 and printed.out.startswith("ok: 3 rows: 3 unchanged"), printed.err


def test_kill_9_loses_at_most_the_measurement_in_flight(tmp_path):
    out, marker = tmp_path / "run", tmp_path / "waiting"
    # 3 rounds per shape, in the orders [torch, fake], [fake, torch], [torch, fake]
    # (sweep.round_order): the fake backend's 6th prepare is shape 2's last.
    proc = start({"wait_on": 6, "marker": str(marker)}, *RUN, "--repeats", "3", "--output-dir", str(out))
    wait_for(marker, proc)
    proc.kill()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "results.json").exists()
    done = [(r["backend"], r["M"], r["round"]) for r in records(out)]
    rounds = [("torch", "fake"), ("fake", "torch"), ("torch", "fake")]
    assert done == [(b, 1, r) for r in range(3) for b in rounds[r]] + \
        [("torch", 3, 0), ("fake", 3, 0), ("fake", 3, 1), ("torch", 3, 1), ("torch", 3, 2)]
    # A kill in the middle of a line: the rebuild drops it, with a note.
    with open(out / "rows.jsonl", "a") as f:
        f.write('{"round": 1, "op": "int4_gemm", "backend": "fa')
    r = report(out)
    assert r.returncode == 0, r.stderr
    cut = "rows.jsonl: line 12 was cut off mid-record"
    assert f"note: {cut}" in r.stderr and "Traceback" not in r.stderr
    assert f"**Rebuilt from rows.jsonl: {cut}" in (out / "report.md").read_text()
    doc = json.loads((out / "results.json").read_text())
    rows = {(x["backend"], x["M"]): x for x in doc["rows"]}
    assert len(rows) == 4 and all(x["status"] == "ok" for x in rows.values())
    assert len(rows[("fake", 1)]["round_p50_us"]) == 3 and len(rows[("torch", 3)]["round_p50_us"]) == 3
    assert len(rows[("fake", 3)]["round_p50_us"]) == 2 and rows[("fake", 3)]["speedup"] > 0
    assert doc["metadata"]["interrupted"] is True and "killed during the sweep" in doc["metadata"]["stopped"]
    for name in ("results.csv", "report.md", "latency.png"):
        assert (out / name).stat().st_size > 0, name


def test_a_second_ctrl_c_while_writing_waits_for_the_outputs(tmp_path):
    out, marker, writing = tmp_path / "run", tmp_path / "waiting", tmp_path / "writing"
    proc = start({"wait_on": 2, "marker": str(marker), "wait_writing": str(writing)}, *RUN,
                 "--output-dir", str(out))
    wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)  # stops the sweep
    wait_for(writing, proc)
    proc.send_signal(signal.SIGINT)  # lands while the outputs are being written
    time.sleep(0.5)
    writing.unlink()
    rc, _, stderr = finish(proc)
    assert rc == 130 and "Traceback" not in stderr, stderr
    assert "finishing the outputs first" in stderr
    for name in ("results.json", "results.csv", "report.md", "latency.png", "memory.png"):
        assert (out / name).stat().st_size > 0, name


def test_ctrl_c_during_imports_is_one_line():
    proc = start({"interrupt_import": "torch"}, "--list-ops")
    rc, stdout, stderr = finish(proc)
    assert rc == 130 and stdout == "", stderr
    assert stderr.strip().splitlines() == ["interrupted (Ctrl-C)"]


def test_a_full_disk_while_writing_leaves_no_cut_off_file(tmp_path):
    """RLIMIT_FSIZE makes every write past 4 KiB fail (EFBIG) from the output
    phase on, as a full disk does: results.json must be whole or absent, the
    run says so in one line and how to rebuild, and the rebuild works."""
    out = tmp_path / "run"
    proc = start({"fsize_limit": 4096}, *RUN, "--output-dir", str(out))
    rc, _, stderr = finish(proc)
    assert rc == 1 and "Traceback" not in stderr, stderr
    assert f"error: could not write {out / 'results.json'}: File too large" in stderr
    assert f"python runner.py report {out}" in stderr
    assert not (out / "results.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert len(records(out)) == 4
    r = report(out)
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["rows"]) == 4 and doc["metadata"]["interrupted"] is False
    assert doc["metadata"]["rebuilt_from"] == "rows.jsonl"


def test_report_refuses_what_it_cannot_rebuild(tmp_path, capsys):
    # The first case as its own process (its imports, its exit status), the others in this one.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = report(tmp_path / "nope")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope'}: no such run folder"]
    capsys.readouterr()
    (tmp_path / "a.json").write_text("{}")
    assert runner.main(["report", str(tmp_path / "a.json")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {tmp_path / 'a.json'}: a file, not a run folder"]
    assert runner.main(["report", str(empty)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {empty}: no rows.jsonl to rebuild from"]
    (empty / "rows.jsonl").write_text("{}\n")
    assert runner.main(["report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no metadata.json" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_stalled_backend_stops_the_run_with_its_rows_and_tables(tmp_path):
    # A backend that never returns (a hung GPU kernel blocks in a CUDA call no
    # signal interrupts; here the fake one's prepare sleeps): past
    # --stall-timeout the watchdog records it as an error, the rest as
    # skipped, writes the tables and exits 1, long before the stall would end.
    # 6 s, not 2: margin for the steps before the stall on a busy CI machine.
    out, marker = tmp_path / "run", tmp_path / "waiting"
    t0 = time.monotonic()
    proc = start({"wait_on": 2, "marker": str(marker)}, *RUN, "--shape", "2,128,64", "--stall-timeout", "6",
                 "--output-dir", str(out))
    rc, stdout, stderr = finish(proc)
    assert rc == 1, stderr
    assert time.monotonic() - t0 < 50  # the fake backend waits 60 s (child_run.WAIT_S)
    why = "fake at 3x256x40 did not finish in 6 s (--stall-timeout"
    assert "Traceback" not in stderr and f"error: the run stopped early: {why}" in stderr
    assert "2 (shape, backend) not run" in stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["metadata"]["interrupted"] is True and doc["metadata"]["stopped"].startswith(why)
    rows = [(r["backend"], r["M"], r["status"]) for r in doc["rows"]]
    assert rows == [("torch", 1, "ok"), ("fake", 1, "ok"), ("torch", 3, "ok"), ("fake", 3, "error"),
                    ("torch", 2, "skipped"), ("fake", 2, "skipped")]
    assert doc["rows"][3]["reason"].startswith(why)
    assert (out / "report.md").exists() and "Stopped early" in (out / "report.md").read_text()


def test_a_stalled_model_step_stops_the_model_run_with_its_rows_and_report(tmp_path):
    # The model bench (--model) under the same watchdog: a quantized variant's
    # decode at batch 2 sleeps (child_run's model_stall, as a hung kernel
    # would block). Its row is an error naming variant and step, the rows
    # before it are kept, the rest `skipped`, every output written, exit 1.
    # The timeout has margin over the steps that must finish: the bf16 variant's
    # load..decode take 1.4 s here, and CI (two busy xdist workers) once took
    # over 2 s for "bf16 load" alone.
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = start({"model_stall": 2}, "--model", "tiny", "--device", "cpu", "--backends", "bf16,torch",
                 "--quant", "int4-g64,int4-channel", "--batch", "1,2,3", "--prompt-len", "4", "--decode-steps", "2",
                 "--quality-tokens", "1x8", "--stall-timeout", "10", "--output-dir", str(out))
    rc, stdout, stderr = finish(proc)
    assert rc == 1, stderr
    assert time.monotonic() - t0 < 50  # the decode waits 60 s (child_run.WAIT_S)
    why = "torch int4-g64 decode at batch 2 did not finish in 10 s (--stall-timeout"
    errors = [line for line in stderr.splitlines() if line.startswith("error")]
    assert "Traceback" not in stderr and len(errors) == 1, stderr
    assert errors[0].startswith(f"error: the run stopped early: {why}") and errors[0].endswith("; 4 row(s) not run")
    assert f"results: {out}" in stdout
    doc = json.loads((out / "results.json").read_text())
    meta = doc["metadata"]
    assert meta["interrupted"] is True and meta["stopped"].startswith(why)
    assert meta["settings"]["stall_timeout_s"] == 10.0
    rows = [(r["backend"], r["quant"], r["batch"], r["status"]) for r in doc["rows"]]
    assert rows == [("bf16", "none", b, "ok") for b in (1, 2, 3)] + \
        [("torch", "int4-g64", 1, "ok"), ("torch", "int4-g64", 2, "error"), ("torch", "int4-g64", 3, "skipped")] + \
        [("torch", "int4-channel", b, "skipped") for b in (1, 2, 3)]
    stalled = doc["rows"][4]
    assert stalled["reason"].startswith(why) and stalled["logits_rel_err"] > 0  # the variant's measurements kept
    assert {r["reason"] for r in doc["rows"][5:]} == {"not run: torch int4-g64 decode at batch 2 stalled"}
    assert len(records(out)) == 9
    assert "Stopped early" in (out / "report.md").read_text()
    for name in ("results.csv", "tokens_per_s.png"):
        assert (out / name).stat().st_size > 0, name


def test_watchdog_fires_only_for_a_step_past_its_time():
    # In a child process: the watchdog's exit would end pytest. A step that
    # ends in time is never reported, even after its deadline passes; one
    # that does not is reported by its label and the process exits with
    # on_stall's status. 0 seconds: off.
    code = """
import time
from qgemm_bench.harness.watchdog import Watchdog
with Watchdog(0, lambda label: 9).step("off"):
    time.sleep(0.3)
w = Watchdog(1.0, lambda label: (print("stalled", label, flush=True), 7)[1])
with w.step("quick"):  # 1 s, not 0.3: a busy CI machine may pause this process a while
    pass
time.sleep(2.0)
print("after", flush=True)
with w.step("slow"):
    time.sleep(30)
print("never")
"""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 7, r.stderr
    assert r.stdout == "after\nstalled slow\n" and time.monotonic() - t0 < 20
