#!/usr/bin/env bash
# Session 28 call 4: 1) Llama-3-8B bf16/triton with lm_head quantized and flex decode attention (b6b98b9's fix);
# 2) Helion's weight-only buckets at every llama layer, int4, M 1,16,64, into the package's store (tarred back).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
summary() {
python3 - "$1" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1] + '/results.csv')):
    f = lambda k: r.get(k) or '-'
    print(r['backend'], r['quant'], r['batch'], r['status'], f('reason')[:200], 'tok/s', f('tokens_per_s')[:7], 'step', f('step_ms_p50')[:6],
          'q/d/a/o/total', *(f(f'split_{c}_ms')[:6] for c in ('quant_gemm', 'dense_gemm', 'attention', 'other', 'total')))
PY
}
timeout -k 10 270 python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
  --backends bf16,triton --lm-head --attention flex --output-dir $R/model_llama-3-8b_lmhead_flex > $R/model8b_flex.log 2>&1
echo "lm-head + flex rc $? wall $(( $(date +%s)-t0 )) s"; summary $R/model_llama-3-8b_lmhead_flex
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 $(( 500 - (t1-t0) )) python3 runner.py tune --op int4_gemm --backends helion --helion-layers --ms 1,16,64 \
  --stop-after-s $(( 470 - (t1-t0) )) > $R/tune_helion.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t1 )) s"; tail -15 $R/tune_helion.log | cut -c1-200
cp -r qgemm_bench/configs/h200 $R/store_h200
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
