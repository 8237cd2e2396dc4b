"""The compile warm-up (harness/warm.py): how many workers a run gets, workers
that compile a share of the shapes each, a failing worker that costs the
run nothing but a line in errors.log, and the stamp that skips a warm-up an
earlier run already did."""

import os
import subprocess

import pytest
import torch

from qgemm_bench import cli
from qgemm_bench.harness import environment, plan, warm
from qgemm_bench.target import Target

CUDA = torch.device("cuda", 0)
NO_SUCH_GPU = torch.device("cuda", 99)  # refused on every machine ("no CUDA device" or "only N present")


@pytest.fixture(autouse=True)
def caches(monkeypatch, tmp_path):
    """Triton's and inductor's caches (where the stamps go) of this test alone."""
    monkeypatch.setenv("TRITON_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    return tmp_path


@pytest.fixture(autouse=True)
def unfrozen():
    """What a test's direct call of a worker's helpers (_inputs, which calls
    capacity.free) froze is unfrozen after it: the other tests of this
    process (test_faults' sweeps) start with nothing frozen."""
    import gc

    frozen_before = gc.get_freeze_count()
    yield
    if not frozen_before:
        gc.unfreeze()


def test_default_jobs_all_cpus_but_two_for_gpu_runs_of_several_shapes():
    assert warm.default_jobs(CUDA, 48, cpus=16) == 14
    assert warm.default_jobs(CUDA, 48, cpus=64) == warm.MAX_JOBS
    assert warm.default_jobs(CUDA, 5, cpus=64) == 5  # one worker per shape at most
    assert warm.default_jobs(CUDA, 48, cpus=32, ranks=2) == 14
    assert warm.default_jobs(CUDA, 48, cpus=16, ranks=4) == 3
    assert warm.default_jobs(CUDA, 48, cpus=16, ranks=8) == 0  # one worker would only add its start-up
    assert warm.default_jobs(CUDA, 48, cpus=3) == 0
    assert warm.default_jobs(CUDA, warm.MIN_SHAPES - 1, cpus=16) == 0
    assert warm.default_jobs(CUDA, 48, autotune="quick", cpus=16) == 0  # each worker would search alone
    assert warm.default_jobs(torch.device("cpu"), 48, cpus=16) == 0


def _plan(*extra, backends="torch,triton"):
    args = cli.parser().parse_args(["--op", "int4_gemm", "--device", "cpu", "--backends", backends,
                                    "--shape", "1,128,64", "--shape", "3,128,64", *extra])
    p = plan.build(args)
    p.target = Target.cpu()
    return p, args


@pytest.mark.skipif(torch.cuda.is_available(), reason="the workers' Triton runs on CPU tensors in the interpreter, "
                    "which the suite turns on only where there is no GPU (on the H200 they compiled nothing)")
def test_workers_compile_their_shares_and_the_phase_is_recorded():
    p, args = _plan()
    errors = []
    summary = warm.warm_up(p, args, 2, errors.append)
    assert errors == []
    assert summary.startswith("compiled triton at 2 shapes in 2 processes")  # torch compiles nothing
    assert p.phase_s["compile warm-up"] > 0
    w = p.warm_up  # the metadata's compile_warm_up: the workers' own seconds, per backend
    assert w["workers"] == 2 and w["failed"] == 0 and not w["skipped"] and w["wall_s"] > 0
    assert list(w["worker_s"]) == ["triton"] and w["worker_s"]["triton"] >= 0


def test_a_failing_worker_is_logged_and_the_run_goes_on():
    p, args = _plan()
    p.device = NO_SUCH_GPU  # the workers' plan refuses it
    errors = []
    summary = warm.warm_up(p, args, 2, errors.append)
    assert "2 failed: see errors.log" in summary
    assert len(errors) == 2 and all("compile warm-up worker (exit 1)" in e for e in errors)
    assert all("CUDA" in e for e in errors)


def test_no_workers_for_one_job_or_no_compiling_backend():
    p, args = _plan()
    assert warm.warm_up(p, args, 1, None) == ""
    p.backends = [b for b in p.backends if not b.compiles]
    assert warm.warm_up(p, args, 4, None) == ""


def test_workers_and_the_sweep_share_one_triton_cache(monkeypatch, caches):
    """Inductor points Triton at its own directory when TRITON_CACHE_DIR is
    unset: a worker that compiled torch.compile first cached our kernels where
    the sweep never looked. The warm-up fixes the directory for both."""
    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
    from triton import knobs

    monkeypatch.delenv("TRITON_CACHE_DIR")
    default = str(knobs.cache.dir)
    assert default.startswith(str(caches / "home"))
    assert triton_cache_dir(0) != default  # what inductor would have set in a worker
    p, args = _plan()
    assert warm.warm_up(p, args, 2, [].append)
    assert os.environ["TRITON_CACHE_DIR"] == default == warm._worker_env()["TRITON_CACHE_DIR"]
    assert triton_cache_dir(0) == default

    monkeypatch.setenv("TRITON_CACHE_DIR", str(caches / "mine"))  # a user's own directory is kept
    environment.pin_triton_cache()
    assert os.environ["TRITON_CACHE_DIR"] == str(caches / "mine") == warm._worker_env()["TRITON_CACHE_DIR"]


def _no_workers(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_a_finished_warm_up_is_not_done_again(monkeypatch, caches):
    p, args = _plan()
    assert warm.warm_up(p, args, 2, [].append).startswith("compiled triton at 2 shapes")
    stamps = sorted(caches.rglob("qgemm-bench-warm/*/*.json"))  # a stamp per (shape, backend) in each cache
    assert [(s.parts[len(caches.parts)], s.name) for s in stamps] == [
        ("inductor", "triton-1x128x64.json"), ("inductor", "triton-3x128x64.json"),
        ("triton", "triton-1x128x64.json"), ("triton", "triton-3x128x64.json")]
    with monkeypatch.context() as m:
        _no_workers(m)
        p2, args2 = _plan()
        summary = warm.warm_up(p2, args2, 2, [].append)
    assert summary.startswith("compile warm-up skipped: an earlier run compiled triton at these 2 shapes")
    assert p2.phase_s["compile warm-up"] == 0 and p2.warm_up["skipped"]

    # Another shape: only it is compiled; either cache's stamp of a step wiped: that step again.
    p3, args3 = _plan("--shape", "5,128,64")
    summary = warm.warm_up(p3, args3, 2, [].append)
    assert summary.startswith("compiled triton at 1 of 3 shapes (2 of 3 steps compiled by an earlier run) in 1 ")
    assert p3.warm_up["compiled_before"] == 2 and p3.warm_up["workers"] == 1
    stamps[0].unlink()  # inductor's of 1x128x64
    assert warm.warm_up(p, args, 2, [].append).startswith("compiled triton at 1 of 2 shapes")
    assert len(list(caches.rglob("qgemm-bench-warm/*/*.json"))) == 6


def test_a_shard_or_another_gpu_index_finds_what_a_run_compiled(monkeypatch):
    """The steps' stamps name no shard and no device index (but
    torch_compile's, below): a torchrun rank's share of the shapes, on
    cuda:1, skips what a one-GPU run on cuda:0 compiled (session 36: such a
    first two-GPU run compiled again for 28.7 s). Another device type does
    not."""
    p, args = _plan()
    p.device = CUDA
    dirs = warm._stamp_dirs(p)
    warm._write_stamps(dirs, [((1, 128, 64), "triton"), ((3, 128, 64), "triton")], {}, p.device)
    rank1, args1 = _plan()
    rank1.device, rank1.shapes = torch.device("cuda", 1), rank1.shapes[1:]
    with monkeypatch.context() as m:
        _no_workers(m)
        assert warm.warm_up(rank1, args1, 2, [].append).startswith("compile warm-up skipped")
    assert warm._stamp_dirs(rank1) == dirs
    cpu, _ = _plan()
    assert warm._stamp_dirs(cpu) != dirs


def test_torch_compile_steps_are_stamped_per_gpu_index(monkeypatch):
    """Inductor's FX graph cache key holds the inputs' device (cuda:1 is not
    cuda:0) and its kernels name it: what torch.compile compiled on cuda:0
    does not load on cuda:1, so a rank there warms its torch_compile steps
    and skips the others; on cuda:0 again nothing is left."""
    import pickle
    from pathlib import Path

    specs = []

    class Worker:  # reads its spec; the first does every step
        def __init__(self, argv, stderr=None, **kw):
            specs.append(pickle.loads(Path(argv[-1]).read_bytes()))
            if len(specs) == 1:
                stderr.write("".join(f"done {i}\n" for i in range(len(specs[0]["tasks"]))))
                stderr.flush()

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

    monkeypatch.setattr(warm.subprocess, "Popen", Worker)
    p, args = _plan(backends="torch_compile,triton")
    p.device = CUDA
    assert warm.warm_up(p, args, 2, [].append).startswith("compiled")
    assert len(specs[0]["tasks"]) == 4, specs[0]["tasks"]
    specs.clear()
    rank1, args1 = _plan(backends="torch_compile,triton")
    rank1.device = torch.device("cuda", 1)
    assert warm.warm_up(rank1, args1, 2, [].append).startswith("compiled torch_compile")
    assert specs and specs[0]["tasks"] == [((1, 128, 64), "torch_compile"), ((3, 128, 64), "torch_compile")]
    specs.clear()
    again, args2 = _plan(backends="torch_compile,triton")
    again.device = CUDA
    assert warm.warm_up(again, args2, 2, [].append).startswith("compile warm-up skipped") and not specs


def test_variables_and_a_config_file_are_part_of_the_stamp(monkeypatch, tmp_path):
    p, args = _plan()
    before = warm._stamp_dirs(p)
    monkeypatch.setenv("QGEMM_PDL", "0")
    assert warm._stamp_dirs(p) != before
    monkeypatch.delenv("QGEMM_PDL")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "elsewhere"))  # the stamp's place, not its name
    assert [s.name for s in warm._stamp_dirs(p)] == [s.name for s in before]
    f = tmp_path / "helion.json"
    f.write_text("{}")
    one = warm._stamp_dirs(p, str(f))
    f.write_text('{"kernels": {}}')
    assert len({s.name for s in (before[0], one[0], warm._stamp_dirs(p, str(f))[0])}) == 3


def test_our_source_is_part_of_the_stamp(monkeypatch):
    p, args = _plan()
    before = warm._stamp_dirs(p)
    real = warm.Path.read_bytes

    def edited(path):
        return real(path) + (b"# edited" if path.name == "fused_gemm.py" else b"")

    monkeypatch.setattr(warm.Path, "read_bytes", edited)
    assert warm._stamp_dirs(p) != before


def test_a_failed_warm_up_leaves_no_stamp(caches):
    p, args = _plan()
    p.device = NO_SUCH_GPU  # the workers fail
    assert "2 failed" in warm.warm_up(p, args, 2, [].append)
    assert not list(caches.rglob("qgemm-bench-warm/**/*.json"))


def _spec(p, args, backends=("triton",)):
    return {"args": vars(args), "device": "cpu", "target": p.target.to_json(),
            "shapes": [tuple(s) for s in p.shapes], "backends": list(backends)}


def test_a_worker_waits_for_memory_then_leaves_the_shape_to_the_sweep(monkeypatch, capsys):
    p, args = _plan()
    monkeypatch.setattr(warm, "OOM_WAIT_S", 0.0)
    from qgemm_bench.operators import int4_gemm

    real, calls = int4_gemm.make_inputs, []

    def short_of_memory(case, seed):
        calls.append(case.shape.M)
        if case.shape.M == 1 and calls.count(1) < warm.OOM_TRIES:  # free again at the last try
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.50 GiB")
        if case.shape.M == 3:  # never
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
        return real(case, seed)

    monkeypatch.setattr(int4_gemm, "make_inputs", short_of_memory)
    # torch: a backend that runs on CPU tensors on any machine (Triton there needs the interpreter)
    assert warm.work(_spec(p, args, backends=("torch",))) == warm.PARTIAL
    assert calls == [1] * warm.OOM_TRIES + [3] * warm.OOM_TRIES
    err = capsys.readouterr().err
    assert "torch at 1x128x64:" in err and "torch at 3x128x64" not in err
    assert "done 0" in err.splitlines() and "done 1" not in err.splitlines()  # the parent stamps step 0 alone
    assert f"inputs at 3x128x64 (try {warm.OOM_TRIES} of {warm.OOM_TRIES}): CUDA out of memory" in err


def test_a_backend_out_of_memory_in_a_worker_makes_it_partial(monkeypatch):
    """Out of memory may pass (the other workers' shapes): that worker is
    PARTIAL and no stamp is written. Any other error recurs in the sweep,
    which records it; a stamp then spares later runs a warm-up that would
    fail the same way."""
    from qgemm_bench.backends.registry import Backend
    from tests.support import extra_backends

    def broken(case, inputs):
        raise RuntimeError("does not compile")

    def short(case, inputs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "broken", "fails", broken, compiles=True),
                                             Backend("int4_gemm", "short", "no memory", short, compiles=True)])
    p, args = _plan(backends="torch,triton,broken,short")
    assert warm.work(_spec(p, args)) == 0
    assert warm.work(_spec(p, args, ("triton", "broken"))) == 0
    assert warm.work(_spec(p, args, ("triton", "short"))) == warm.PARTIAL


def test_a_lost_context_or_a_wrapped_oom_is_no_step_done(monkeypatch, caches, capsys):
    """A sticky CUDA error fails every later step of that worker, none of
    them as it would in the sweep: the worker stamps none of them and stops,
    leaving the steps it did not claim to the others. Out of memory under
    another exception (a compiler's wrapper) is out of memory: no stamp."""
    from qgemm_bench.backends.registry import Backend
    from tests.support import extra_backends

    def lost(case, inputs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def wrapped(case, inputs):
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except torch.OutOfMemoryError as e:
            raise RuntimeError("backend compiler failed") from e

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "lost", "sticky", lost, compiles=True),
                                             Backend("int4_gemm", "wrapped", "oom", wrapped, compiles=True)])
    p, args = _plan(backends="torch,lost,wrapped")
    claims = caches / "claims"
    claims.mkdir()
    tasks = [((1, 128, 64), "wrapped"), ((1, 128, 64), "lost"), ((3, 128, 64), "torch"), ((1, 128, 64), "torch")]
    assert warm.work({**_spec(p, args), "tasks": tasks, "claims": str(claims)}) == warm.PARTIAL
    err = capsys.readouterr().err.splitlines()
    assert not [line for line in err if line.startswith("done")], err
    assert sorted(os.listdir(claims)) == ["0", "1"]  # steps 2 and 3 left to the other workers


def test_a_failed_try_has_let_go_of_its_tensors_before_the_worker_waits(monkeypatch):
    """The OOM's traceback holds the failed call's frame: the wait (and the
    cache emptied before it) comes after the except block, so that memory is
    free for the others meanwhile."""
    import weakref

    p, args = _plan()
    from qgemm_bench.operators import int4_gemm

    made, seen = [], []

    def short_of_memory(case, seed):
        partial = torch.zeros(1000)  # what the failed call had allocated
        made.append(weakref.ref(partial))
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(int4_gemm, "make_inputs", short_of_memory)
    monkeypatch.setattr(warm.time, "sleep", lambda s: seen.append(made[-1]() is None))
    from qgemm_bench.types import Case, Shape

    case = Case(p.op.NAME, Shape(1, 128, 64), p.dtype, p.device, p.op_settings, p.target)
    assert warm._inputs(p, case) is None
    assert seen == [True] * (warm.OOM_TRIES - 1)  # no wait after the last try


def test_autotuners_cache_their_timings_unless_told_otherwise(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "unset below; restored after the test")
    monkeypatch.delenv("TRITON_CACHE_AUTOTUNING")
    environment.cache_autotuning()
    from triton import knobs

    assert os.environ["TRITON_CACHE_AUTOTUNING"] == "1" and knobs.autotuning.cache
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "0")  # a user's choice is kept
    environment.cache_autotuning()
    assert os.environ["TRITON_CACHE_AUTOTUNING"] == "0" and not knobs.autotuning.cache


def test_workers_take_only_the_tasks_no_other_worker_claimed(caches, capsys):
    """One list of (shape, backend) tasks for every worker: each takes the
    next one nobody claimed (its file in the claims folder), so no two
    compile the same and none idles while tasks are left."""
    p, args = _plan()
    claims = caches / "claims"
    claims.mkdir()
    tasks = [((1, 128, 64), "torch"), ((3, 128, 64), "torch")]
    (claims / "0").touch()  # another worker took the first
    spec = {**_spec(p, args, ("torch",)), "tasks": tasks, "claims": str(claims)}
    assert warm.work(spec) == 0
    err = capsys.readouterr().err
    assert "torch at 3x128x64:" in err and "torch at 1x128x64" not in err
    assert sorted(os.listdir(claims)) == ["0", "1"]
    assert warm.work(spec) == 0  # nothing left for a later worker
    assert "torch at" not in capsys.readouterr().err


def test_no_workers_for_a_rank_without_shapes(caches):
    """Under torchrun with more ranks than shapes a rank has none; --compile-jobs
    N still asks for workers there (the task count divided the time limit: a
    ZeroDivisionError traceback on that rank)."""
    p, args = _plan()
    p.shapes = []
    assert warm.warm_up(p, args, 2, None) == ""


def test_a_worker_unfreezes_what_it_froze(caches):
    """capacity.free freezes a worker's survivors after each shape; left
    frozen at exit, Triton's bindings printed their nanobind leak report
    (kilobytes, the tail errors.log keeps of a failed worker), and a caller
    in-process (these tests) stayed frozen for good."""
    import gc

    p, args = _plan()
    assert gc.get_freeze_count() == 0
    assert warm.work(_spec(p, args, ("torch",))) == 0
    assert gc.get_freeze_count() == 0


def test_the_steps_go_backend_by_backend(monkeypatch):
    """The workers take one list of steps, backend by backend, so the steps
    running at once are at different shapes (shape by shape, every worker
    built inputs of one layer at once)."""
    import pickle
    from pathlib import Path

    p, args = _plan(backends="torch,triton,helion")
    specs = []

    class Done:  # a worker that read its spec and finished
        def __init__(self, argv, **kw):
            specs.append(pickle.loads(Path(argv[-1]).read_bytes()))

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

    monkeypatch.setattr(warm.subprocess, "Popen", Done)
    assert warm.warm_up(p, args, 3, [].append).startswith("compiled triton, helion at 2 shapes in 3 processes")
    assert len(specs) == 3 and all(s == specs[0] for s in specs)
    assert specs[0]["tasks"] == [((1, 128, 64), "triton"), ((3, 128, 64), "triton"),
                                 ((1, 128, 64), "helion"), ((3, 128, 64), "helion")]

