"""The run's device and metadata: versions, GPU facts, and the measured
speed-of-light ceilings (copy bandwidth, dense bf16 matmul rate)."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

import torch

from qgemm_bench.operators.common import InputError
from qgemm_bench.target import gpu_slug  # noqa: F401 (the naming rule, target.py's; tuners use it here)

REPO = Path(__file__).resolve().parents[2]  # the checkout, for its git commit


def runs_dir() -> Path:
    """Where runs go without --output-dir: results/runs/ under the current
    folder (the repo root when run as `python runner.py`; an installed
    qgemm-bench writes where it is started, not into site-packages)."""
    return Path.cwd() / "results" / "runs"


def parse_device(name: str) -> torch.device:
    """A --device name other than auto as a CPU or CUDA device, whether or
    not this machine has it; InputError for any other name."""
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise InputError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"--device {name}: only cpu and cuda devices are supported")
    return dev


def resolve_device(name: str) -> torch.device:
    """'auto' picks cuda when present. A CUDA request without a GPU is an InputError."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = parse_device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"--device {name}: no CUDA device is available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) present")
        return torch.device("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    return dev


def table_gpu(device: torch.device) -> str | None:
    """The store entry name of a device (target.gpu_slug, the naming rule) on
    CUDA, None on the CPU (the interpreter: no GPU's table applies)."""
    return gpu_slug(device) if device.type == "cuda" else None


def package_version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _run(cmd: list[str], cwd=None) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit() -> str | None:
    """HEAD (+ '-dirty'); QGEMM_GIT_COMMIT overrides it for copies of the tree
    without .git (e.g. a tree shipped to a GPU machine)."""
    if os.environ.get("QGEMM_GIT_COMMIT"):
        return os.environ["QGEMM_GIT_COMMIT"]
    head = _run(["git", "rev-parse", "HEAD"], cwd=REPO)
    if head and _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO):
        head += "-dirty"
    return head


# Environment variables that change what runs (our PDL switch, Inductor's
# settings): a run records those set, so a row's numbers say what made them.
RECORDED_ENV_PREFIXES = ("QGEMM_", "TORCHINDUCTOR_")


def recorded_env() -> dict:
    """The set variables of RECORDED_ENV_PREFIXES (QGEMM_GIT_COMMIT aside:
    it is git_commit)."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(RECORDED_ENV_PREFIXES) and k != "QGEMM_GIT_COMMIT"}


def one_cpu_thread() -> None:
    """A CPU run times on one intra-op thread unless OMP_NUM_THREADS says
    (inside threads_kept): with the cores shared (CI, a busy laptop)
    torch's spin-waiting threads stalled a 17x384x96 dequant+matmul 46x
    (16 ms against 0.35) and the rows' speedups with it."""
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


@contextlib.contextmanager
def threads_kept():
    """The caller's intra-op thread count, given back however the run ends."""
    n = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(n)


def collect(device: torch.device) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": package_version("triton"),
        "helion": package_version("helion"),
        "cuda": torch.version.cuda,
        "git_commit": git_commit(),
        "device": str(device),
        "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
        "cpu": platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),  # one in CPU runs (one_cpu_thread)
        "env": recorded_env(),
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        # A device without an index (the tuners' torch.device("cuda")) is the current one: nvidia-smi --id=None fails.
        index = device.index if device.index is not None else torch.cuda.current_device()
        meta.update({
            "gpu": p.name,
            "capability": f"{p.major}.{p.minor}",
            "sms": p.multi_processor_count,
            "l2_bytes": p.L2_cache_size,
            "gpu_mem_bytes": p.total_memory,
            "driver": _run(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version",
                            "--format=csv,noheader"]),
        })
    else:
        meta["gpu"] = None
    return meta


VERSION_KEYS = ("torch", "triton", "helion", "cuda", "gpu", "driver")


def versions(device: torch.device) -> dict:
    """The software and GPU a tuned entry was timed with (collect's, those
    known): a store's provenance and each tuner pass record carry it."""
    gpu = device.type == "cuda" and torch.cuda.is_available()  # not: a tuner's default device in CPU tests
    meta = collect(device if gpu else torch.device("cpu"))
    return {k: meta[k] for k in VERSION_KEYS if meta.get(k)}


def measure_ceilings(device: torch.device) -> dict:
    """Device-to-device copy GB/s (bytes read + written) and bf16 8192^3 matmul
    TFLOP/s, medians of 30 timed runs after 0.1 s of warm-up, on random data."""
    if device.type != "cuda":
        return {}
    with torch.cuda.device(device):
        copy_GBps = _copy_bandwidth(device)
        tflops = _bf16_matmul_rate(device)
        torch.cuda.empty_cache()
    return {"copy_GBps": copy_GBps, "bf16_matmul_TFLOPs": tflops}


def _copy_bandwidth(device: torch.device) -> float:
    src = torch.randn(256 * 2**20, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    return 2 * src.nbytes / _median_ms(lambda: dst.copy_(src)) / 1e6


def _bf16_matmul_rate(device: torch.device, n: int = 8192) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return 2 * n**3 / _median_ms(lambda: a @ b) / 1e9


def _median_ms(fn, reps: int = 30, warm_s: float = 0.1) -> float:
    # A run measures first thing, from an idle card: a few calls left its copy figure moving between runs
    # whose kernels agreed (results/h200/README.md).
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        fn()
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[reps // 2]


def pin_triton_cache() -> None:
    """Fix Triton's cache directory (Triton's default unless set) for this
    process and any it starts, at the start of every GPU run. Left unset,
    inductor and Helion each point it at their own directory the first
    time they compile: the compile warm-up's workers did so before they
    compiled our kernels, a sweep loading torch.compile from its cache did
    not, and missed every Triton kernel the workers had compiled
    (results/h200/README.md); Helion's stored code
    (helion_kernels/codecache.py) lives there too."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return
    from triton import knobs

    os.environ["TRITON_CACHE_DIR"] = str(knobs.cache.dir)


def cache_autotuning() -> None:
    """Keep Triton autotuners' timings on disk (TRITON_CACHE_AUTOTUNING, unless
    set), for sweeps and model runs: a peer's autotuner (gemlite's, on the one
    config its cache leaves it) then times a key once per machine, not in
    every run and every warm-up worker. Set before the peer is imported (an
    autotuner reads it when its kernel is defined); never for `tune`, which
    must time again."""
    os.environ.setdefault("TRITON_CACHE_AUTOTUNING", "1")
