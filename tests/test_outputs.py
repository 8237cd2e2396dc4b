"""The run folder: an unusable --output-dir is one line and exit 2 before
anything is measured; concurrent runs never share a folder; outputs are
written whole or not at all."""

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner
from qgemm_bench.backends.registry import Backend, Prepared
from qgemm_bench.harness import outputs
from tests.support import extra_backends

REPO = Path(__file__).resolve().parent.parent


def _immutable(folder: Path) -> bool:
    """Make an empty folder unwritable even for root (chattr +i), or by mode for others."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return True
    return subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0


@pytest.mark.parametrize("where,message", [
    ("proc", "cannot create it ("),  # as root: /proc holds no files; else: no write permission
    ("through_file", "cannot create it (Not a directory)"),
    ("file", "is a file, not a folder"),
    ("immutable", "cannot write in it"),
])
def test_unusable_output_dir_is_one_line_before_measuring(tmp_path, monkeypatch, capsys, where, message):
    prepared = []

    def record(case, inputs):
        prepared.append(case.shape)
        return Prepared(lambda: inputs.x)

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "spy", "records its calls", record)])
    target = {"proc": Path("/proc/qgemm-bench-test/run"), "through_file": tmp_path / "a.txt" / "run",
              "file": tmp_path / "a.txt", "immutable": tmp_path / "locked"}[where]
    (tmp_path / "a.txt").write_text("x")
    if where == "immutable":
        target.mkdir()
        if not _immutable(target):
            pytest.skip("cannot make a folder unwritable here")
    try:
        code = runner.main(["--op", "int4_gemm", "--backends", "spy", "--output-dir", str(target)])
    finally:
        if where == "immutable":
            subprocess.run(["chattr", "-i", str(target)], capture_output=True)
            target.chmod(0o755)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: --output-dir {target}: {message}"), err
    assert prepared == []  # nothing was measured
    if where == "immutable":
        assert list(target.iterdir()) == []


def test_output_dir_in_proc_is_refused_before_the_plans_notes(capsys):
    # Every default backend: on CPU the plan notes the CUDA-only peers it
    # skips; the refusal comes first and alone (as root os.access says /proc
    # is writable, and only creating the folder failed, after those notes).
    code = runner.main(["--op", "int4_gemm", "--output-dir", "/proc/qgemm-bench-test/run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --output-dir /proc/qgemm-bench-test/run: "
                                                              "cannot create it ("), err


def test_virtual_filesystems_come_from_mountinfo_not_sizes(tmp_path):
    # A tmpfs or ramfs of no size reports no blocks and takes folders: only
    # the kernel's own filesystems are refused, by type.
    from qgemm_bench.harness.outputs import virtual_filesystem

    info = tmp_path / "mountinfo"
    info.write_text("22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                    "23 1 0:22 / /sys rw - sysfs sysfs rw\n"
                    f"24 1 0:23 / {tmp_path}/empty rw - tmpfs tmpfs rw,size=0k\n"
                    f"25 1 0:24 / {tmp_path}/with\\040space rw - proc proc rw\n"
                    "26 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
    (tmp_path / "with space").mkdir()
    assert virtual_filesystem(Path("/proc/x/y"), str(info)) == "proc"
    assert virtual_filesystem(Path("/sys"), str(info)) == "sysfs"
    assert virtual_filesystem(tmp_path / "empty" / "run", str(info)) is None  # tmpfs, however small
    assert virtual_filesystem(tmp_path / "with space" / "run", str(info)) == "proc"  # the kernel's \040
    assert virtual_filesystem(Path("/procfoo"), str(info)) is None  # a prefix of a name is not a mount above it
    assert virtual_filesystem(Path("/proc"), str(tmp_path / "missing")) is None  # no mountinfo: not refused


def test_default_folders_do_not_collide(tmp_path, monkeypatch, capsys):
    """Default names have one-second resolution: a second run in the same
    second used to fail with "already holds files" though no folder was given."""
    from qgemm_bench.harness import benchmark

    monkeypatch.setattr(benchmark, "default_folder", lambda p: tmp_path / "runs" / "20260101-000000-int4_gemm-cpu")
    args = ["--op", "int4_gemm", "--backends", "torch", "--shape", "1,128,64", "--rep", "1", "--warmup", "0",
            "--no-plots"]
    assert runner.main(args) == 0 and runner.main(args) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["20260101-000000-int4_gemm-cpu",
                                                                      "20260101-000000-int4_gemm-cpu-2"]
    for folder in (tmp_path / "runs").iterdir():
        assert len(json.loads((folder / "results.json").read_text())["rows"]) == 1


CLAIM = """
import sys, time
from pathlib import Path
from qgemm_bench.errors import InputError
from qgemm_bench.harness.outputs import RunFolder
root, mode, trials, me = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
(root / f"ready{me}").touch()  # imported: waiting for the first go
for t in range(trials):
    while not (root / f"go{t}").exists():
        time.sleep(0.0005)
    try:
        f = RunFolder.claim(root / f"out{t}") if mode == "explicit" else RunFolder.claim_new(root / f"run{t}")
        print(t, f.path.name, flush=True)
    except InputError:
        print(t, "refused", flush=True)
"""


@pytest.mark.parametrize("mode", ["explicit", "default"])
def test_concurrent_runs_never_share_a_folder(tmp_path, mode):
    """Four processes claim together, ten times: an explicit folder goes to
    exactly one of them (the others are refused); default names all differ."""
    trials, n = 10, 4
    procs = [subprocess.Popen([sys.executable, "-c", CLAIM, str(tmp_path), mode, str(trials), str(i)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(n)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(n)):  # every process past its imports
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            pytest.fail(f"a claiming process did not start: {[p.communicate() for p in procs]}")
        time.sleep(0.02)
    for t in range(trials):
        (tmp_path / f"go{t}").touch()
        time.sleep(0.05)
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    claims = [line.split() for out, _ in outs for line in out.splitlines()]
    for t in range(trials):
        got = [name for tt, name in claims if tt == str(t)]
        assert len(got) == n
        if mode == "explicit":
            assert got.count(f"out{t}") == 1 and got.count("refused") == n - 1, got
        else:
            assert len(set(got)) == n, got


def test_two_runs_on_one_output_dir_one_is_refused(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, str(REPO / "runner.py"), "--op", "int4_gemm", "--backends", "torch", "--shape",
            "1,128,64", "--rep", "1", "--warmup", "0", "--no-plots", "--output-dir", str(out)]
    procs = [subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    refused = outs[[p.returncode for p in procs].index(2)][1]
    assert "already holds files" in refused and "Traceback" not in refused
    assert len(json.loads((out / "results.json").read_text())["rows"]) == 1


def test_atomic_write_keeps_the_old_file_on_a_full_disk(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text('{"old": true}')

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", full)
    with pytest.raises(outputs.WriteError, match="could not write .*results.json: No space left on device"):
        outputs.write_atomic(target, '{"new": true}' * 1000)
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_metadata_records_the_command_it_was_given_and_the_store_it_read(tmp_path, monkeypatch):
    # In-process, main(argv) ran recorded sys.argv (pytest's own), not argv; and
    # nothing said which store entry the rows ran on.
    monkeypatch.setattr(sys, "argv", ["pytest", "-q"])
    argv = ["--op", "int4_gemm", "--backends", "cublas", "--shape", "1,128,64", "--rep", "1", "--warmup", "0",
            "--no-plots", "--device", "cpu", "--output-dir", str(tmp_path / "run")]
    assert runner.main(argv) == 0
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["settings"]["argv"] == argv
    assert meta["store"] == {f: {"note": "the interpreter: no GPU's configs"} for f in ("weight_only", "split_k",
                                                                                       "helion")}


def test_results_json_rounds_samples_to_a_tenth_of_a_nanosecond_and_keeps_the_rest():
    from qgemm_bench.harness.outputs import results_json
    from qgemm_bench.harness.results import Row

    row = Row("int4_gemm", "triton", 1, 64, 64, "bfloat16", {}, "cuda:0", "graph", "ok", p50_us=185.26079654693604,
              samples_us=[185.26079654693604, 185.15520095825195, 7.0])
    doc = json.loads(results_json([row], {"gpu": "x"}))
    assert doc["rows"][0]["samples_us"] == [185.2608, 185.1552, 7.0]
    assert doc["rows"][0]["p50_us"] == 185.26079654693604 and doc["metadata"] == {"gpu": "x"}
    assert row.samples_us[0] == 185.26079654693604  # the row itself is left whole (rows.jsonl)
