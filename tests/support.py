"""What the test files share: the device the kernels run on, cases, fp64
references, tolerances, and registering extra (fake) backends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from qgemm_bench.backends import registry
from qgemm_bench.operators.common import rel_error
from qgemm_bench.target import Target
from qgemm_bench.types import Case, Shape

CPU = torch.device("cpu")
# Kernels run on the GPU when there is one (bf16), else in the Triton
# interpreter on CPU tensors (fp16: the interpreter has no bfloat16).
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DT = torch.bfloat16 if DEV.type == "cuda" else torch.float16
TOL = {torch.float16: 3e-3, torch.bfloat16: 1e-2}
CUDA = torch.device("cuda", 0)
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# Tests with explicit interpreter configs (Helion): on a GPU the gpu tests cover the kernels.
interpreter = pytest.mark.skipif(DEV.type == "cuda", reason="CPU interpreter configs; the gpu tests cover CUDA")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Import into a module of tiny-model tests: they need no intra-op
    threads; on a shared 2-core machine their spin-waits stalled steps by
    100x (400 ms instead of 2 ms)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def fake_target(name: str = "gpu_a", capability=(9, 0), sms: int = 132, l2_bytes: int = 50 * 2**20,
                copy_GBps: float | None = None, smem_per_block: int = 227 * 1024) -> Target:
    """A GPU Target made up for a test (no device asked)."""
    return Target(name, f"Fake {name.upper()}", capability, sms, smem_per_block, l2_bytes, copy_GBps)


def target_for(tensor) -> Target:
    """The Target of the device a tensor lives on (target.of): what the tests
    hand the kernels, which never look one up themselves."""
    from qgemm_bench.target import of

    return of(tensor.device)


def table_store(root, family: str, doc: dict, target: Target | None = None):
    """(target, store): a store under root holding doc as the family's table
    of a made-up GPU (fake_target()), for tests to hand to the dispatch."""
    from qgemm_bench.configs.store import PROVENANCE_KEYS, Store

    target = target or fake_target()
    store = Store(root)
    store.write(target.name, family, doc, dict.fromkeys(PROVENANCE_KEYS, "test"), target)
    return target, store


def stored_target(device=CUDA) -> Target:
    """The Target of the store entry the device's runs use (its own, else the
    nearest of its compute capability): GPU tests hand it to the dispatch, so
    they check the choices of the entry they name on any GPU of that kind."""
    from qgemm_bench.configs import store
    from qgemm_bench.target import of

    gpu = store.load(of(device), "weight_only").gpu
    if gpu is None:
        pytest.skip(f"no store entry of this GPU's compute capability ({of(device).cc})")
    return store.entries()[gpu]


def store_files(family: str) -> dict:
    """The package store's files of a family, by GPU (at least one)."""
    from qgemm_bench.configs.store import DEFAULT

    files = {gpu: DEFAULT.path(gpu, family) for gpu in DEFAULT.entries() if family in DEFAULT.families(gpu)}
    assert files, f"no {family} tables in the store"
    return files


def a_store_file(family: str):
    """One tuned table of the family from the package store (the first GPU's by name)."""
    return next(iter(store_files(family).values()))


def case(op, shape, dtype=DT, device=DEV, **settings) -> Case:
    return Case(op.NAME, Shape(*shape), dtype, device, op.Settings(**settings))


def seed() -> int:
    """A fresh seed per test call (new random inputs each run)."""
    return int(np.random.randint(1 << 30))


def rel(a, b) -> float:
    """Relative error of a against b in fp64 (norm of the difference / norm of b)."""
    return (torch.linalg.vector_norm(a.double() - b.double()) / torch.linalg.vector_norm(b.double())).item()


def ulp(t: torch.Tensor) -> torch.Tensor:
    """The spacing of t's float16 / bfloat16 values at each element, in fp64
    (subnormals at the smallest normal's): how far one rounding step moves it."""
    f = torch.finfo(t.dtype)
    return f.eps * torch.exp2(torch.floor(torch.log2(t.double().abs().clamp_min(f.smallest_normal))))


def fp64(x, w_deq):
    return x.double() @ w_deq.double()


def check(out, ref, dtype=DT):
    """out has the dtype, shape and accuracy a correct kernel gives against ref."""
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    err = rel_error(out, ref)
    assert err <= TOL[dtype], err


def check_ws_calls(gemm, x, w_deq, calls=3):
    """FusedGemm `gemm` (a warp-specialized config) over `calls` calls, each
    with new activations of x's shape against fp64 on w_deq, then x again
    (the same bits). Before each call the split planes (ws_gemm.workspace)
    are set to NaN, so a last split that read them before the others
    stored theirs, or that took a count left from the call before, shows;
    after each, every counter is back at zero."""
    first = None
    for i in range(calls):
        xi = x if i == 0 else torch.randn_like(x)
        for key, (planes, _) in gemm._workspace.items():
            if isinstance(key, tuple) and key[0] == "ws":
                planes.fill_(float("nan"))
        out = gemm(xi)
        check(out, fp64(xi, w_deq), x.dtype)
        first = out if i == 0 else first
        for key, (_, counts) in gemm._workspace.items():
            if isinstance(key, tuple) and key[0] == "ws":
                assert not counts.any(), "split counters not zeroed"
    assert torch.equal(gemm(x), first)


def run_backend(op, name, c: Case, inputs=None):
    """(output, inputs, prepared) of backend `name` on case c."""
    b = registry.get(op.NAME, name)
    assert b.why_not(c) is None, b.why_not(c)
    inputs = op.make_inputs(c, seed()) if inputs is None else inputs
    prepared = b.prepare(c, inputs)
    out = prepared.fn()
    if c.device.type == "cuda":
        torch.cuda.synchronize()
    assert out.dtype == c.dtype and out.shape == (c.shape.M, c.shape.N)
    return out, inputs, prepared


def check_on_gpu(op, name: str, shape, dtype=torch.bfloat16, **settings) -> None:
    """Backend `name` of `op` on the GPU (bf16 unless `dtype`) against the
    reference (skipped, with its reason, where the backend cannot take the
    case)."""
    c = case(op, shape, dtype, CUDA, **settings)
    if reason := registry.get(op.NAME, name).why_not(c):
        pytest.skip(reason)
    out, inputs, _ = run_backend(op, name, c)
    check(out, op.reference(inputs), dtype)


def triton_config(bm=16, bn=32, bk=64, split=1, **flags) -> dict:
    """An explicit Triton config for our kernels (the interpreter cannot autotune)."""
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": 4, "num_stages": 1, **flags}


# The packed-PTX decodes (DECODE_ASM) exist on the GPU only, for bf16.
ASM = [True] if DEV.type == "cuda" else []


def rel_np(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def extra_backends(monkeypatch, op: str, extra: list) -> None:
    """Register fake backends of `op` for one test."""
    registry.modules()  # the real ones first
    table = {o: dict(bs) for o, bs in registry._registered.items()}
    for b in extra:
        table[op][b.name] = b
    monkeypatch.setattr(registry, "_registered", table)


def np_unpack(packed: np.ndarray) -> np.ndarray:
    """Independent nibble unpack: [K//2, N] bytes -> [K, N] codes 0..15."""
    b = packed.astype(np.uint8)
    out = np.empty((2 * b.shape[0], b.shape[1]), dtype=np.int64)
    out[0::2] = b & 0x0F
    out[1::2] = b >> 4
    return out


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def load_script(name: str):
    """scripts/<name>.py as a module of its own (its main() and helpers
    callable in this process)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script_in_process(path, argv, monkeypatch, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python path *argv`, run here: the script
    executes as __main__ (runpy) on this process's imports. For usage errors
    of scripts that stop right after their argument checks on a CPU (so an
    argument accepted by mistake still ends there, in one line); each such
    test also runs the script as its own process (the imports and exit)."""
    import os
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", [str(path), *map(str, argv)])
    monkeypatch.setattr(sys, "path", list(sys.path))
    environ = dict(os.environ)  # restored after: a script may change it
    capsys.readouterr()
    code = 0
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    out, err = capsys.readouterr()
    return code, out, err


def free_port() -> int:
    """A TCP port free on this machine now (for a spawned process group's MASTER_PORT)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The child of script_runs: main() of the script for each argv, its result as one JSON line.
_SCRIPT_RUNS = """
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location(sys.argv[1], sys.argv[2])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
for argv in json.loads(sys.argv[3]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = script.main(argv)
    print("script_runs:", json.dumps([code, out.getvalue(), err.getvalue()]), flush=True)
"""


def script_runs(name: str, argvs: list, timeout: float = 600) -> list:
    """(returncode, stdout, stderr) of scripts/<name>.py's main(argv), for
    each argv, in one child process: the script's imports (torch, triton,
    helion: seconds each time) are paid once, not once an argv."""
    import json
    import subprocess
    import sys
    from types import SimpleNamespace

    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", _SCRIPT_RUNS, name, str(repo / "scripts" / f"{name}.py"),
                        json.dumps([list(map(str, a)) for a in argvs])], capture_output=True, text=True, cwd=repo,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    found = [json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines() if line.startswith("script_runs: ")]
    runs = [SimpleNamespace(returncode=c, stdout=o, stderr=e) for c, o, e in found]
    assert len(runs) == len(argvs), r.stdout
    return runs
