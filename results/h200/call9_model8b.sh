#!/usr/bin/env bash
# Run as: unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc LIMIT=470; bash call9_model8b.sh
# (session 27, commit f7e13bb, on the warm machine of call 8: bytecode compiled there).
# H200 call A (issue 54): Llama-3-8B random weights, the whole decode step compiled and replayed as a CUDA
# graph, bf16 / triton / tinygemm / fbgemm int4-g128 at batch 1 and 16: the README's end-to-end table.
# Carry: .gpu (whl: fbgemm_gpu_genai + filecheck are what this run needs; commit). transformers: the image's.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
timeout ${LIMIT:-570} python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
  --backends bf16,triton,tinygemm,fbgemm --output-dir $R/model_llama-3-8b ${ARGS:-} > $R/model8b.log 2>&1
echo "model8b rc $? wall $(( $(date +%s)-t0 )) s"
grep -v -i "warn\|forward_call" $R/model8b.log | tail -30
python3 - <<'PY'
import csv
for r in csv.DictReader(open('/tmp/runs/model_llama-3-8b/results.csv')):
    f = lambda k: r.get(k) or '-'
    print(r['backend'], r['quant'], r['batch'], r['status'], 'step', f('step_ms_p50'), 'split', f('split_source'),
          'kernels', f('split_kernels'), 'q/d/a/o/total', *(f(f'split_{c}_ms')[:6] for c in ('quant_gemm', 'dense_gemm', 'attention', 'other', 'total')))
PY
tar czf $OUT/model8b.tgz -C $R model_llama-3-8b model8b.log
