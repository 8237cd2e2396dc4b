#!/usr/bin/env bash
# A quick GPU shakedown of the runner (a few shapes per operator, both timing modes).
# Usage: scripts/gpu_smoke.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/gpu_smoke.sh OUTDIR}
rm -rf "$out"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
python3 runner.py --op int4_gemm --shape 1,8192,8192 --shape 16,8192,8192 --shape 4096,8192,8192 \
  --shape 16,4096,6144 --no-plots --output-dir "$out/int4_graph"
python3 runner.py --op int4_gemm --shape 1,8192,8192 --shape 16,8192,8192 --timing events \
  --no-plots --output-dir "$out/int4_events"
python3 runner.py --op nvfp4_gemm --shape 1,8192,8192 --shape 16,8192,8192 --shape 4096,8192,8192 \
  --output-dir "$out/nvfp4"
python3 runner.py --op split_k_gemm --shape 64,32768,64 --shape 16,4096,16 --bias --output-dir "$out/splitk"
