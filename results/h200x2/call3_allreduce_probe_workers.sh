#!/usr/bin/env bash
# x2 (nvidia-h200-x2), ~5 min, after x30.sh or alone: issue 56's two-GPU first run (91.8 s at 9c5f74c, warm-up
# 45.7 with 14 workers a rank on 32 CPUs; per-shape compiles 2-4x slower than on one H200). The default int4 run
# under torchrun from cold caches (a fresh HOME and inductor dir each: Triton's, humming's and Helion's caches
# live under HOME) with 14 (the default), 8 and 6 compile workers a rank. First the all-reduce probe (~1.5 min).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && touch /tmp/site.done && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
[ -e /tmp/pyc.done ] || { timeout 60 python3 -m compileall -q -j 32 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done; }
nproc; lscpu | grep -E "^(Thread|Core|Socket|Model name)" | cut -c1-80
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
# A 70B TP decode step's 160 all-reduces (17.8 us each with NCCL's defaults in 9c5f74c's run): NCCL's own settings.
for s in "" "NCCL_PROTO=LL" "NCCL_PROTO=LL128" "NCCL_PROTO=Simple" "NCCL_ALGO=Tree" "NCCL_PROTO=LL NCCL_MAX_NCHANNELS=2"; do
  env $s timeout -k 5 60 torchrun --standalone --nproc-per-node 2 scripts/allreduce_probe.py 2>&1 | grep -E "^2 ranks|rror" | tail -2
done | tee $R/allreduce_probe.txt
for jobs in 14 8 6; do
  left=$(( 540 - ($(date +%s)-t0) )); [ $left -lt 130 ] && { echo "jobs $jobs skipped: $left s left"; break; }
  H=$(mktemp -d /tmp/home.XXXX); t1=$(date +%s)
  ( export HOME=$H TORCHINDUCTOR_CACHE_DIR=$H/inductor; unset TRITON_CACHE_DIR HUMMING_CACHE_DIR
    timeout -k 10 $left torchrun --standalone --nproc-per-node 2 runner.py --op int4_gemm --compile-jobs $jobs \
      --output-dir $R/int4_x2_jobs$jobs > $R/int4_x2_jobs$jobs.log 2>&1 )
  echo "jobs $jobs rc $? wall $(( $(date +%s)-t1 )) s"
  python3 -c "import json;m=json.load(open('$R/int4_x2_jobs$jobs/results.json'))['metadata'];w=m.get('compile_warm_up') or {};print('wall_s',m.get('wall_s'),'warm-up',m['phase_s'].get('compile warm-up'),w.get('worker_s'))" 2>&1 | tail -1 | cut -c1-250
  tar czf $OUT/runs.tgz -C /tmp runs
done
echo "all wall $(( $(date +%s)-t0 )) s"
