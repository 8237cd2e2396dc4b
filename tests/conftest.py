import dataclasses
import os

import pytest
import torch

from qgemm_bench.harness.watchdog import Watchdog

# The Triton kernels run on CPU tensors through the interpreter, which must be
# chosen before triton is first imported (test modules import the backends).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

    # The interpreter's integer-overflow sanitizer computes every int32 add,
    # sub and mul a second time in int64 and range-checks it, then hands the
    # check to device_assert, which the interpreter drops unless its options
    # say debug (they never do: InterpreterOptions() is fixed, debug False).
    # So the check can never fail here: it is only work, about half of an
    # interpreted kernel's time. Switched off only where debug is off, which
    # leaves every kernel's results (and every assertion that could fire) as
    # they were.
    from triton.runtime import interpreter as _interpreter

    _builder = _interpreter.interpreter_builder
    if not _builder.options.debug and _builder.options.sanitize_overflow:
        _builder.options = dataclasses.replace(_builder.options, sanitize_overflow=False)


# A GPU kernel that never finishes blocks its test in a CUDA call that no
# signal interrupts, and the suite with it. Past QGEMM_TEST_STALL_S seconds (0:
# off) a `gpu` test's process prints one line naming it and exits 1: under
# xdist its worker dies, that test is reported failed and the others go on.
GPU_TEST_STALL_S = 600.0
_STALL_S = pytest.StashKey[float]()  # the limit pytest_configure read, for the fixture


def pytest_configure(config):
    raw = os.environ.get("QGEMM_TEST_STALL_S", str(GPU_TEST_STALL_S))
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise pytest.UsageError(f"QGEMM_TEST_STALL_S={raw!r}: seconds a GPU test may take, a number >= 0 (0: no limit)")
    config.stash[_STALL_S] = seconds


@pytest.fixture(autouse=True)
def _gpu_stall_guard(request):
    seconds = request.config.stash[_STALL_S]
    if not seconds or request.node.get_closest_marker("gpu") is None:
        yield
        return

    def stalled(nodeid) -> int:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # fd 2 back to the terminal: os._exit skips pytest's own report
            capture.suspend_global_capture(in_=False)
        os.write(2, f"\nerror: {nodeid} did not finish in {seconds:g} s (QGEMM_TEST_STALL_S; a GPU kernel that "
                    "never finishes cannot be stopped in-process): exiting\n".encode())
        return 1

    with Watchdog(seconds, stalled).step(request.node.nodeid):
        yield
