"""The CLI in a child process, with a fake backend and hooks, for tests that
send it real signals, kill it or limit its file sizes.

    python tests/child_run.py SPEC_JSON runner-args...

SPEC keys (all optional):
  wait_on: N          the fake backend's N-th prepare writes `marker` and waits there (for a signal)
  marker: PATH        the file whose appearance tells the test where the child is
  wait_writing: PATH  writing the outputs first writes PATH and waits until the test removes it
  fsize_limit: BYTES  files written from the outputs phase on may not grow past BYTES (RLIMIT_FSIZE)
  interrupt_import: MODULE   send this process SIGINT while MODULE is being imported
  die_on_rank: R      under torchrun, rank R's process exits at the fake backend's first prepare
  term_rank0_in: M.F  under torchrun, rank 0 sends itself SIGTERM as it enters qgemm_bench.harness.M.F
                      ("plan.build": planning; "distributed.gather": waiting for the others; "shards.merge":
                      putting the rows together)
  model_stall: B      --model: a quantized variant's decode at batch B waits (as a hung GPU kernel would)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
WAIT_S = 60  # a test that forgets to signal fails by timeout, not by hanging


def _wait_for_signal(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))
    time.sleep(WAIT_S)


def _wait_until_removed(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))
    deadline = time.monotonic() + WAIT_S
    while Path(marker).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


class _InterruptImport:
    """A meta-path hook that sends SIGINT while `name` is being imported."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    if "interrupt_import" in spec:
        import runpy

        sys.meta_path.insert(0, _InterruptImport(spec["interrupt_import"]))
        sys.argv = [str(REPO / "runner.py"), *argv]
        runpy.run_path(str(REPO / "runner.py"), run_name="__main__")
        return

    from qgemm_bench import cli, operators
    from qgemm_bench.backends import registry
    from qgemm_bench.backends.registry import Prepared
    from qgemm_bench.harness import outputs

    registry.modules()
    calls = {"n": 0}

    @registry.backend("int4_gemm", "fake", "the reference's result; waits where the test says")
    def fake(case, inputs):
        calls["n"] += 1
        if str(spec.get("die_on_rank")) == os.environ.get("RANK"):
            os._exit(1)  # a dead process: no cleanup, no gather
        if calls["n"] == spec.get("wait_on"):
            _wait_for_signal(spec["marker"])
        y = operators.get(case.op).reference(inputs).to(case.dtype)
        return Prepared(lambda: y.clone())

    real_write_all = outputs.write_all

    def write_all(*a, **k):
        if "wait_writing" in spec:
            _wait_until_removed(spec["wait_writing"])
        if "fsize_limit" in spec:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (spec["fsize_limit"], spec["fsize_limit"]))
        return real_write_all(*a, **k)

    outputs.write_all = write_all
    if "term_rank0_in" in spec and os.environ.get("RANK") == "0":
        import importlib

        where, name = spec["term_rank0_in"].rsplit(".", 1)
        module = importlib.import_module(f"qgemm_bench.harness.{where}")
        real = getattr(module, name)

        def terminated(*a, **k):
            os.kill(os.getpid(), signal.SIGTERM)  # as torchrun does once a peer died
            return real(*a, **k)

        setattr(module, name, terminated)
    if "model_stall" in spec:
        from qgemm_bench.model import decode
        from qgemm_bench.model.quant_linear import QuantLinear

        real_decode = decode.time_decode

        def time_decode(model, batch, *a, **k):
            if batch == spec["model_stall"] and any(isinstance(m, QuantLinear) for m in model.modules()):
                time.sleep(WAIT_S)
            return real_decode(model, batch, *a, **k)

        decode.time_decode = time_decode
    sys.exit(cli.main(argv))


if __name__ == "__main__":
    main()
