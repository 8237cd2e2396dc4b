"""Compile before timing, in parallel: worker processes run the compiling
backends' prepare and first call, one (shape, backend) at a time, each
taking the next one no worker has claimed yet from one list, backend by
backend (so no worker idles while another still has shapes: a humming
compile is 6.5 s, a Triton one under 1), filling the caches a later process
reads (Triton's and torch.compile's on-disk caches, humming's cubins), so
the sweep itself only loads what was compiled.

Compiling dominates a cold GPU run (H200, default int4 preset, every peer:
humming 124 s, helion 68, torch.compile 46, triton 44 of 472 s), and one
process compiles one kernel at a time. A worker's failure costs nothing but
its time: the sweep prepares every backend again and records what fails.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAX_JOBS = 14
SPARE_CPUS = 2  # the sweep's own process and the rest of the machine
MIN_SHAPES = 4  # fewer shapes compile in less time than workers take to start (~10 s of imports)
SECONDS_PER_STEP = 60.0  # a worker's time limit per (shape, backend) it compiles; a hung kernel ends there
MAX_WARM_S = 600.0  # and the warm-up's, whatever the sweep's size
PARTIAL = 3  # a worker's exit status when some step ran out of memory or lost the context: no stamp for it
# Eight workers' inputs at once filled an H200's 140 GB on the NVFP4 preset
# (its quantization's fp32 temporaries): a worker waits for the others.
OOM_TRIES = 4
OOM_WAIT_S = 2.0
# What a stamp's key covers besides the plan: a new version of any of these
# compiles different kernels.
STAMP_PACKAGES = ("torch", "triton", "helion", "gemlite", "humming-kernels", "fbgemm-gpu-genai")
STAMP_ENV = ("QGEMM_", "HELION_", "TORCHINDUCTOR_", "TRITON_")
# Backends whose compiled code names the GPU's index: inductor's FX graph cache key holds the inputs' device
# (cuda:1 is not cuda:0) and its kernels carry it, so their steps are stamped per index.
STAMP_INDEX = ("torch_compile",)


def default_jobs(device, n_shapes: int, autotune: str = "none", cpus: int | None = None, ranks: int = 1) -> int:
    """Workers for one process's warm-up: the CPUs but SPARE_CPUS, shared by
    the torchrun ranks, at most MAX_JOBS and one per shape; none on CPU, for
    a few shapes, or when Helion autotunes (each worker would search alone).
    A worker mostly keeps one CPU busy (results/h200/README.md: 14 against 8)."""
    if device.type != "cuda" or n_shapes < MIN_SHAPES or autotune != "none":
        return 0
    cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    jobs = min(MAX_JOBS, (cpus - SPARE_CPUS) // max(1, ranks), n_shapes)
    return jobs if jobs >= 2 else 0


def warm_up(p, args, jobs: int, log_error) -> str:
    """Run the compiling backends of plan p at its shapes in `jobs` worker
    processes; returns a one-line summary ("" when nothing ran). log_error:
    where a worker's failure is written (the run folder's error log)."""
    from qgemm_bench.harness import environment

    backends = [b.name for b in p.backends if b.compiles]
    if jobs < 2 or not backends or not p.shapes:  # no shapes: a torchrun rank of a run with fewer than ranks
        return ""
    environment.pin_triton_cache()
    dirs = _stamp_dirs(p, getattr(args, "helion_configs", None))
    # Backend by backend: the steps running at once are at as many shapes as workers, each a worker's own
    # inputs, as when each worker had its share of the shapes (shape by shape, all 14 workers built inputs of
    # one layer at once: NVFP4's took 10-23 GB a worker on the H200). Inputs cost ~12 ms a shape to make.
    every = [(tuple(s), b) for b in backends for s in p.shapes]
    tasks = [t for t in every if not _stamped(dirs, t, p.device)]  # not what an earlier run compiled (any shard)
    before = len(every) - len(tasks)
    if not tasks:
        p.phase_s["compile warm-up"] = p.phase_s.get("compile warm-up", 0.0)
        p.warm_up = {"skipped": True, "stamps": dirs[0].name}
        return (f"compile warm-up skipped: an earlier run compiled {', '.join(backends)} at these "
                f"{len(p.shapes)} shapes with this code and these packages (caches: {dirs[0].parent.parent})")
    workers = min(jobs, len(tasks))
    # Each worker's share is unknown beforehand: a hung step ends at an even share's limit.
    limit = min(SECONDS_PER_STEP * -(-len(tasks) // workers), MAX_WARM_S)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qgemm-warm-") as tmp:
        spec = Path(tmp) / "spec.pkl"
        claims = Path(tmp) / "claims"
        claims.mkdir()
        spec.write_bytes(pickle.dumps({"args": vars(args), "device": str(p.device), "target": p.target.to_json(),
                                       "tasks": tasks, "claims": str(claims)}))
        procs = []
        try:
            for i in range(workers):
                err = open(Path(tmp) / f"err{i}.txt", "w+")  # noqa: SIM115 - closed below
                procs.append((subprocess.Popen([sys.executable, "-m", "qgemm_bench.harness.warm", str(spec)],
                                               stdout=subprocess.DEVNULL, stderr=err, env=_worker_env()), err))
            failed, worker_s, done = 0, {}, set()
            for proc, err in procs:
                try:
                    code = proc.wait(timeout=max(1.0, limit - (time.perf_counter() - t0)))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = f"stopped after {limit:.0f} s"
                err.seek(0)
                text = err.read()
                for name, secs in re.findall(r"^(\S+) at \S+: ([\d.]+) s$", text, flags=re.M):
                    worker_s[name] = worker_s.get(name, 0.0) + float(secs)
                done.update(int(i) for i in re.findall(r"^done (\d+)$", text, flags=re.M))
                if code != 0:
                    failed += 1
                    tail = text[-4000:]
                    what = "some shapes or backends did not compile; the sweep compiles them" \
                        if code == PARTIAL else f"exit {code}"
                    log_error(f"compile warm-up worker ({what}):\n{tail}")
        finally:  # also on Ctrl-C / SIGTERM: no worker outlives the warm-up
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
            for proc, err in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
                err.close()
    s = time.perf_counter() - t0
    p.phase_s["compile warm-up"] = p.phase_s.get("compile warm-up", 0.0) + s
    p.warm_up = {"skipped": False, "workers": workers, "wall_s": round(s, 2), "failed": failed,
                 "worker_s": {k: round(v, 1) for k, v in sorted(worker_s.items(), key=lambda kv: -kv[1])},
                 **({"compiled_before": before} if before else {})}
    _write_stamps(dirs, [tasks[i] for i in sorted(done) if i < len(tasks)],
                  {"warm_up_s": round(s, 1), "workers": workers, "date": time.strftime("%F %T")}, p.device)
    note = f" ({failed} failed: see errors.log)" if failed else ""
    shapes = len({shape for shape, _ in tasks})
    where = f"{shapes} shapes" if not before else \
        f"{shapes} of {len(p.shapes)} shapes ({before} of {len(every)} steps compiled by an earlier run)"
    return f"compiled {', '.join(backends)} at {where} in {workers} processes: {s:.0f} s{note}"


def _stamp_dirs(p, config_file: str | None = None) -> list[Path]:
    """Where a warm-up marks each (shape, backend) step it finished, one
    folder in Triton's cache and one in inductor's (wiping either forgets
    it): named by what else decides the kernels compiled, i.e. the operator
    settings, dtype, device type and GPU, the package versions, our source
    and configs, a --helion-configs file's contents and the variables our
    code, Helion, inductor and Triton read (QGEMM_*, HELION_*,
    TORCHINDUCTOR_*, TRITON_* but the cache's own place). Not the device's
    index: a torchrun rank on cuda:1 loads what a run on cuda:0 compiled
    (but STAMP_INDEX's steps, _stamp_name)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from qgemm_bench.fileio import files_digest
    from qgemm_bench.harness.environment import package_version

    source = files_digest(Path(__file__).resolve().parents[1], ("**/*.py", "**/*.json"))
    what = {"op": p.op.NAME, "settings": p.op_settings.label(), "dtype": str(p.dtype), "device": p.device.type,
            "gpu": (p.target.device_name, p.target.capability, p.target.sms), "source": source,
            "packages": {name: package_version(name) for name in STAMP_PACKAGES},
            "config_file": hashlib.sha256(Path(config_file).read_bytes()).hexdigest() if config_file else None,
            "env": sorted((k, v) for k, v in os.environ.items() if k.startswith(STAMP_ENV)
                          and k not in ("TRITON_CACHE_DIR", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR"))}
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return [Path(d) / "qgemm-bench-warm" / key for d in (os.environ["TRITON_CACHE_DIR"], cache_dir())]


def _stamp_name(task, device) -> str:
    shape, backend = task
    index = f"-{device.type}{device.index}" if backend in STAMP_INDEX and device.index is not None else ""
    return f"{backend}-{'x'.join(map(str, shape))}{index}.json"


def _stamped(dirs: list[Path], task, device) -> bool:
    return all((d / _stamp_name(task, device)).is_file() for d in dirs)


def _write_stamps(dirs: list[Path], tasks: list, info: dict, device) -> None:
    for d in dirs:
        with contextlib.suppress(OSError):  # no stamp: the next run compiles again, nothing worse
            d.mkdir(parents=True, exist_ok=True)
            for task in tasks:
                (d / _stamp_name(task, device)).write_text(json.dumps(info) + "\n")


def _worker_env() -> dict:
    """The parent's environment without torchrun's (a worker is one process),
    and one inductor compile thread: its default pool is a process per CPU,
    128 interpreters importing torch for 8 workers on a 16-CPU H200 host,
    where a run with them did not end in 600 s."""
    drop = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
            "MASTER_PORT", "TORCHELASTIC_RUN_ID"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


def _claim(claims: str | None, i: int) -> bool:
    """Whether this worker takes task i: the first to create its file in
    `claims` does (None: every task is this worker's)."""
    if claims is None:
        return True
    try:
        os.close(os.open(os.path.join(claims, str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def work(spec: dict) -> int:
    """A worker: prepare and call a backend once at a shape, for each task
    ((shape, backend); or every backend at every shape of spec's "shapes")
    it claims in spec's "claims" folder (none: all of them). Exit 0 when all
    compiled or failed as they will in the sweep, PARTIAL when some ran out
    of memory or a lost CUDA context stopped it (the sweep compiles those
    itself). Each step done (compiled, nothing to compile, or failed as it
    will in the sweep) is a "done i" line on stderr: the parent stamps
    those."""
    frozen_before = gc.get_freeze_count()
    try:
        return _work(spec)
    finally:
        if not frozen_before:  # what capacity.free froze: freed at exit (frozen, Triton's bindings print
            gc.unfreeze()  # kilobytes of nanobind leak reports into the log's tail) and for a caller in-process


def _work(spec: dict) -> int:
    import torch

    from qgemm_bench.harness import capacity, faults, plan
    from qgemm_bench.harness.results import OOM
    from qgemm_bench.target import Target
    from qgemm_bench.types import Case, Shape

    args = argparse.Namespace(**spec["args"])
    args.device = spec["device"]
    p = plan.build(args)
    target = Target.from_json(spec["target"])
    cuda = p.device.type == "cuda"
    if cuda:
        torch.cuda.set_device(p.device)
    tasks = spec.get("tasks") or [(shape, name) for shape in spec["shapes"] for name in spec["backends"]]
    backends = {b.name: b for b in p.backends}
    missed, held, inputs = 0, None, None  # the inputs of shape `held`, kept for its next task
    for i, (shape, name) in enumerate(tasks):
        if name not in backends or not _claim(spec.get("claims"), i):
            continue
        case = Case(p.op.NAME, Shape(*shape), p.dtype, p.device, p.op_settings, target)
        b = backends[name]
        if b.why_not(case):
            print(f"done {i}", file=sys.stderr, flush=True)  # nothing to compile here, ever
            continue
        if held != tuple(shape):
            inputs = held = None
            capacity.free(p.device)  # what the last shape cached: the other workers' large shapes need it
            inputs = _inputs(p, case)
            if inputs is None:
                missed += 1
                continue
            held = tuple(shape)
        t0 = time.perf_counter()
        try:
            b.prepare(case, inputs).fn()
            if cuda:
                torch.cuda.synchronize(p.device)
            print(f"{b.name} at {case.shape}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            print(f"done {i}", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 - the sweep prepares it again and records the error
            # Out of memory (the other workers' shapes; also under a compiler's wrapper) may pass: not
            # compiled this time. A lost context fails every later step here, none as in the sweep: this
            # worker stops, the others take the steps left. Any other error recurs in the sweep, which
            # records it: the warm-up did all it could (done).
            oom, lost = faults.status(e) == OOM, faults.context_lost(e)
            missed += oom or lost
            print(f"{b.name} at {case.shape}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr, flush=True)
            if lost:
                break
            if not oom:
                print(f"done {i}", file=sys.stderr, flush=True)
    inputs = None
    capacity.free(p.device)
    return PARTIAL if missed else 0


def _inputs(p, case):
    """The shape's inputs; when the GPU's memory is taken by the other
    workers' shapes, tried again as they free theirs (None: not this time)."""
    import torch

    from qgemm_bench.harness import capacity

    for attempt in range(OOM_TRIES):
        try:
            return p.op.make_inputs(case, p.seed)
        except torch.OutOfMemoryError as e:
            message = str(e)[:120]
        # Out of the except block: its traceback no longer holds the failed call's tensors.
        print(f"inputs at {case.shape} (try {attempt + 1} of {OOM_TRIES}): {message}", file=sys.stderr, flush=True)
        capacity.free(p.device)
        if attempt + 1 < OOM_TRIES:
            time.sleep(OOM_WAIT_S)
    return None


def main(argv: list[str]) -> int:
    spec = pickle.loads(Path(argv[0]).read_bytes())
    return work(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
