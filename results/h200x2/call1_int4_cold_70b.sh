#!/usr/bin/env bash
# Session 29 x2 call A (a FRESH nvidia-h200-x2: cold caches): the cold int4 default run sharded over 2 GPUs
# under torchrun (issue 56: < 70 s), then Llama-3-70B TP2 bf16 vs triton int4-g128 at batch 1, compiled,
# flex attention, lm_head quantized (issue 54: >= 1.8x).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
timeout 60 python3 -m compileall -q -j 32 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader; nproc
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
timeout -k 10 200 torchrun --standalone --nproc-per-node 2 runner.py --op int4_gemm --output-dir $R/int4_2gpu > $R/int4_2gpu.log 2>&1
echo "int4 2-GPU cold: rc $? wall $(( $(date +%s)-t0 )) s"
python3 -c "import json;m=json.load(open('$R/int4_2gpu/metadata.json'));print(m.get('wall_s'), m.get('phase_s'), str(m.get('compile_warm_up'))[:300])" 2>&1 | cut -c1-700
python3 -c "import json;r=json.load(open('$R/int4_2gpu/results.json'))['rows'];import collections;print(collections.Counter(x['status'] for x in r))"
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 $(( 565 - (t1-t0) )) torchrun --standalone --nproc-per-node 2 runner.py --model llama-3-70b --quant int4-g128 --batch 1 \
  --compile default --backends bf16,triton --lm-head --attention flex --output-dir $R/model_llama-3-70b > $R/model70b.log 2>&1
echo "70B TP2 rc $? wall $(( $(date +%s)-t1 )) s"
python3 - <<'PY'
import csv
for r in csv.DictReader(open('/tmp/runs/model_llama-3-70b/results.csv')):
    f = lambda k: r.get(k) or '-'
    print(r['backend'], r['quant'], r['batch'], r['status'], f('reason')[:200], 'tok/s', f('tokens_per_s')[:7], 'x', f('speedup')[:5],
          'step', f('step_ms_p50')[:6], 'ar', f('allreduce_ms')[:6], 'compile', f('compile_s')[:5],
          'q/d/a/o/total', *(f(f'split_{c}_ms')[:6] for c in ('quant_gemm', 'dense_gemm', 'attention', 'other', 'total')))
PY
grep -v -i "warn\|forward_call\|^\s*$" $R/model70b.log | tail -8 | cut -c1-300
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
