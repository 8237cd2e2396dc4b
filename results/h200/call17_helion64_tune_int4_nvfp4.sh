#!/usr/bin/env bash
# Session 29 call E (one H200): Helion int4 M = 64 layer buckets with frag twins (b5e84ed), then the default
# int4 and NVFP4 runs (every backend, every peer) for results/h200/int4_gemm and nvfp4_gemm.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
timeout -k 10 90 python3 runner.py tune --op int4_gemm --backends helion --helion-layers --ms 64 --stop-after-s 75 > $R/tune_helion64.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t0 )) s"; tr '\r' '\n' < $R/tune_helion64.log | grep -E "^int4_gemm|InvalidConfig|WRONG|^tuned" | tail -10 | cut -c1-200
cp -r qgemm_bench/configs/h200 $R/store_h200; tar czf $OUT/runs.tgz -C /tmp runs
for op in int4_gemm nvfp4_gemm; do
  t1=$(date +%s); left=$(( 420 - (t1-t0) ))
  timeout -k 10 $left python3 runner.py --op $op --output-dir $R/$op > $R/$op.log 2>&1
  echo "$op rc $? wall $(( $(date +%s)-t1 )) s"
  python3 -c "import json;d=json.load(open('$R/$op/results.json'));m=d['metadata'];import collections;print(m.get('wall_s'), collections.Counter(x['status'] for x in d['rows']))" 2>&1 | tail -1
  tar czf $OUT/runs.tgz -C /tmp runs
done
echo "all wall $(( $(date +%s)-t0 )) s"
