#!/usr/bin/env bash
# On a GPU machine: default-preset runs for the committed baselines
# (results/h100/). Usage: scripts/gpu_baselines.sh OUTDIR OP... ; OP may be
# int4_gemm (or int4_gemm_B etc.: a second run, for an A/A comparison), or
# "slow": int4 M<=16 Helion rows with deliberately worse configs (split_k 1).
# Every run measures in REPEATS rounds (default 3), so compare tests round by round.
set -uo pipefail
r=${REPEATS:-3}
out=${1:?usage: scripts/gpu_baselines.sh OUTDIR OP...}
shift
export PYTHONUNBUFFERED=1
w=$(mktemp -d)
for op in "$@"; do
  s=$SECONDS
  case $op in
    int4_gemm*) timeout 560 python3 runner.py --op int4_gemm --backends cublas,tinygemm,triton,helion \
                 --repeats "$r" --output-dir "$w/$op" > "$w/$op.log" 2>&1 ;;
    nvfp4_gemm) timeout 500 python3 runner.py --op nvfp4_gemm --backends cublas,triton,helion \
                 --repeats "$r" --output-dir "$w/$op" > "$w/$op.log" 2>&1 ;;
    split_k_gemm) timeout 400 python3 runner.py --op split_k_gemm --repeats "$r" --output-dir "$w/$op" \
                 > "$w/$op.log" 2>&1 ;;
    slow)
      python3 - "$w/slow.json" <<'PY'
import json, sys
doc = json.load(open("backends/helion_kernels/configs/h100.json"))
for entry in doc["kernels"]["int4_gemm"].values():
    entry["config"]["split_k"] = 1
json.dump(doc, open(sys.argv[1], "w"))
PY
      shapes=$(python3 -c "from operators.common import llama_shapes as l; print(' '.join(f'--shape {s.M},{s.K},{s.N}' for s in l() if s.M <= 16))")
      timeout 200 python3 runner.py --op int4_gemm --backends helion --helion-configs "$w/slow.json" --no-plots \
        --repeats "$r" $shapes --output-dir "$w/int4_slow" > "$w/slow.log" 2>&1 ;;
  esac
  echo "$op: rc $? in $((SECONDS - s)) s"
done
tar czf "$out/runs.tgz" -C "$w" .
