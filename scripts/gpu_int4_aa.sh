#!/usr/bin/env bash
# On a GPU machine: re-tune the small-M Helion buckets, then two back-to-back
# default int4 runs (A/A for runner.py compare) and one run with deliberately
# worse Helion configs (split_k forced to 1: a regression compare must flag).
# Usage: scripts/gpu_int4_aa.sh OUTDIR
set -uo pipefail
out=${1:?usage: scripts/gpu_int4_aa.sh OUTDIR}
export PYTHONUNBUFFERED=1
be=cublas,tinygemm,triton,helion
timeout 60 python3 scripts/tune_helion.py --op int4_gemm --op nvfp4_gemm --m 1,16 > "$out/tune_small.log" 2>&1
grep -v '^  ' "$out/tune_small.log" | tail -5
cp backends/helion_kernels/configs/h100.json "$out/"
for run in A B; do
  start=$SECONDS
  timeout 250 python3 runner.py --op int4_gemm --backends $be --output-dir "$out/int4_$run" > "$out/int4_$run.log" 2>&1
  echo "run $run: rc $? in $((SECONDS - start)) s"
done
python3 - "$out/slow.json" <<'PY'
import json, sys
doc = json.load(open("backends/helion_kernels/configs/h100.json"))
for entry in doc["kernels"]["int4_gemm"].values():
    entry["config"]["split_k"] = 1
json.dump(doc, open(sys.argv[1], "w"))
PY
timeout 80 python3 runner.py --op int4_gemm --backends helion --helion-configs "$out/slow.json" --no-plots \
  --output-dir "$out/int4_slow" > "$out/int4_slow.log" 2>&1
echo "slow run: rc $?"
cd "$out" && tar czf runs.tgz int4_A int4_B int4_slow *.log && rm -rf int4_A int4_B int4_slow
