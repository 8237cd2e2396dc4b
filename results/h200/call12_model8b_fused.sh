#!/usr/bin/env bash
# Next session, call A (nvidia-h200, carry .gpu): Llama-3-8B with fused q/k/v and gate/up (ebef3f6 on), the
# compiled decode step: 1) bf16/triton/tinygemm/fbgemm at batch 1,16 (the baseline's variants, now fused);
# 2) bf16/triton with lm_head quantized and flex decode attention (the published anchors' setup).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
summary() {
python3 - "$1" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1] + '/results.csv')):
    f = lambda k: r.get(k) or '-'
    print(r['backend'], r['quant'], r['batch'], r['status'], 'tok/s', f('tokens_per_s')[:7], 'step', f('step_ms_p50')[:6],
          'q/d/a/o/total', *(f(f'split_{c}_ms')[:6] for c in ('quant_gemm', 'dense_gemm', 'attention', 'other', 'total')),
          'kl', f('kl')[:6])
PY
}
timeout -k 10 300 python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
  --backends bf16,triton,tinygemm,fbgemm --output-dir $R/model_llama-3-8b > $R/model8b.log 2>&1
echo "fused rc $? wall $(( $(date +%s)-t0 )) s"; summary $R/model_llama-3-8b
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 $(( 560 - (t1-t0) )) python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
  --backends bf16,triton --lm-head --attention flex --output-dir $R/model_llama-3-8b_lmhead_flex > $R/model8b_b.log 2>&1
echo "lm-head + flex rc $? wall $(( $(date +%s)-t1 )) s"; summary $R/model_llama-3-8b_lmhead_flex
tar czf $OUT/runs.tgz -C /tmp runs
