#!/usr/bin/env python3
"""Where does run-to-run latency noise come from? Measures a few int4 rows
the way the sweep does (harness.measure), several rounds in one process,
with the GPU's SM clock, power and temperature after each row.
Usage (GPU): python3 scripts/noise_probe.py ROUNDS > probe.jsonl
Run it twice as separate processes to see the between-process shift."""

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import backends  # noqa: E402
import operators  # noqa: E402
from qgemm_bench.harness.measure import Settings, measure  # noqa: E402
from qgemm_bench.operators.common import Case, Shape  # noqa: E402

SHAPES = [Shape(256, 14336, 4096), Shape(256, 4096, 4096), Shape(1024, 14336, 4096), Shape(4096, 8192, 8192),
          Shape(1, 8192, 8192)]


def gpu_state() -> dict:
    q = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip().split(", ")
    return dict(zip(["sm_mhz", "mem_mhz", "power_w", "temp_c", "throttle"], out, strict=False))


def main() -> None:
    rounds = int(sys.argv[1])
    op = operators.get("int4_gemm")
    dev = torch.device("cuda")
    settings = {"group_size": 128}
    bks = [b for b in backends.for_op("int4_gemm") if b.name in ("cublas", "triton")]
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    cases = []
    for s in SHAPES:
        case = Case("int4_gemm", s, torch.bfloat16, dev, settings, {})
        inputs = op.make_inputs(case, 0)
        cases.append((case, inputs, op.reference(inputs)))
    t0 = time.time()
    for r in range(rounds):
        for case, inputs, ref in cases:
            for b in bks:
                f = measure(case, b, inputs, ref, op.tolerance(torch.bfloat16), Settings(), l2)
                print(json.dumps({"round": r, "t": round(time.time() - t0, 2), "backend": b.name,
                                  "shape": list(case.shape), "p50": f["p50_us"], "p20": f["p20_us"],
                                  "p80": f["p80_us"], **gpu_state()}), flush=True)


if __name__ == "__main__":
    main()
