#!/usr/bin/env bash
# GPU: an operator's default preset with every backend that runs here, as the
# committed baselines (results/<gpu>/) were made, in REPEATS rounds (default 3,
# so `compare` tests round by round). Leaves OUTDIR/<op>/ and OUTDIR/<op>.log.
#   scripts/gpu_baselines.sh OUTDIR int4_gemm nvfp4_gemm split_k_gemm
# BACKENDS_<op> runs only those backends (torch, the baseline, always runs);
# PRESET_<op> runs that preset instead of the op's default (e.g. PRESET_int4_gemm=m-sweep).
set -uo pipefail
if [ $# -lt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2
fi
out=$1; shift
r=${REPEATS:-3}
export PYTHONUNBUFFERED=1
for op in "$@"; do
  case $op in
    int4_gemm|nvfp4_gemm|split_k_gemm) ;;
    *) echo "unknown op $op" >&2; exit 2 ;;
  esac
  backends_var=BACKENDS_$op
  b=${!backends_var:-}
  preset_var=PRESET_$op
  preset=${!preset_var:-}
  s=$SECONDS
  python3 runner.py --op "$op" ${b:+--backends "$b"} --repeats "$r" ${preset:+--shapes "$preset"} \
    --output-dir "$out/$op" > "$out/$op.log" 2>&1
  echo "$op: rc $? in $((SECONDS - s)) s"
done
