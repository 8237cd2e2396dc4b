#!/usr/bin/env bash
# GPU: the default-preset runs behind the committed baselines (results/<gpu>/),
# each measured in REPEATS rounds (default 3) so `compare` tests round by round.
# Leaves OUTDIR/<op>/ run folders and OUTDIR/<op>.log.
#   scripts/gpu_baselines.sh OUTDIR int4_gemm nvfp4_gemm split_k_gemm
# BACKENDS_<op> overrides an op's backend list (torch, the baseline, always runs);
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
    # torch.compile stays out of the weight-only baselines: its per-shape compile would double the run;
    # gemlite too (it autotunes shapes it ships no config for, ~10 s each; it is in the m-sweep baseline).
    int4_gemm) b=${BACKENDS_int4_gemm:-cublas,tinygemm,fbgemm,triton,helion} ;;
    nvfp4_gemm) b=${BACKENDS_nvfp4_gemm:-cublas,triton,helion} ;;
    split_k_gemm) b=${BACKENDS_split_k_gemm:-torch_compile,triton,triton_deterministic,helion,helion_deterministic} ;;
    *) echo "unknown op $op" >&2; exit 2 ;;
  esac
  preset_var=PRESET_$op
  preset=${!preset_var:-}
  s=$SECONDS
  python3 runner.py --op "$op" --backends "$b" --repeats "$r" ${preset:+--shapes "$preset"} \
    --output-dir "$out/$op" > "$out/$op.log" 2>&1
  echo "$op: rc $? in $((SECONDS - s)) s"
done
