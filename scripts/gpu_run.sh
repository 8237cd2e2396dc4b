#!/usr/bin/env bash
# Run default-preset sweeps (and optionally the GPU tests) on a GPU machine,
# leaving a tarball of the run folders and logs in OUTDIR.
# Usage: scripts/gpu_run.sh OUTDIR [op ...] [tests]
set -uo pipefail
out=${1:?usage: scripts/gpu_run.sh OUTDIR [int4_gemm|nvfp4_gemm|split_k_gemm|tests ...]}
shift
export PYTHONUNBUFFERED=1
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
for what in "$@"; do
  if [ "$what" = tests ]; then
    timeout 400 python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tee "$work/pytest_gpu.log" | tail -15
    # The interpreter tests, compiled for real (bf16, explicit configs).
    timeout 300 python3 -m pytest -q tests/test_triton.py -p no:cacheprovider 2>&1 | tee "$work/pytest_triton.log" | tail -8
  else
    timeout 500 python3 runner.py --op "$what" --output-dir "$work/$what" 2>&1 | tee "$work/$what.log"
  fi
done
tar czf "$out/runs.tgz" -C "$work" .
