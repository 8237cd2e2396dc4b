#!/usr/bin/env bash
# On a GPU machine: re-tune the Helion configs (scripts/tune_helion.py), run
# the GPU tests of the Triton and Helion backends, and time the headline
# shapes. Logs, the new config file and run folders go to OUTDIR.
# Usage: scripts/gpu_tune_and_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/gpu_tune_and_check.sh OUTDIR}
export PYTHONUNBUFFERED=1
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
timeout 270 python3 scripts/tune_helion.py > "$out/tune.log" 2>&1
grep -v '^  ' "$out/tune.log" | tail -20
cp backends/helion_kernels/configs/*.json "$out/"
timeout 140 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider \
  -k "helion or tritonbench or triton or runner_on_cuda" > "$out/pytest_gpu.log" 2>&1
tail -6 "$out/pytest_gpu.log"
s="--shape 1,8192,8192 --shape 16,8192,8192 --shape 4096,8192,8192"
timeout 60 python3 runner.py --op int4_gemm $s --backends cublas,tinygemm,triton,helion --no-plots \
  --output-dir "$work/int4" > "$work/int4.log" 2>&1
timeout 45 python3 runner.py --op nvfp4_gemm $s --backends cublas,triton,helion --no-plots \
  --output-dir "$work/nvfp4" > "$work/nvfp4.log" 2>&1
timeout 30 python3 runner.py --op split_k_gemm --shape 64,32768,64 --shape 16,4096,16 --bias --no-plots \
  --output-dir "$work/splitk" > "$work/splitk.log" 2>&1
python3 scripts/summarize_rows.py "$work/int4" "$work/nvfp4" "$work/splitk"
tar czf "$out/runs.tgz" -C "$work" .
