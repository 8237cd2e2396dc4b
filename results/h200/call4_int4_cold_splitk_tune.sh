#!/usr/bin/env bash
# H200 call B: the default int4 run from cold caches, guarded; memory snapshots; split-K tune part 1.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
(for i in 1 2 3 4 5 6; do sleep 20; echo "--- t=$(( $(date +%s)-t0 ))"; free -g | head -2; ps -eo rss,etime,args --sort=-rss | head -6 | cut -c1-150; ps -e --no-headers | wc -l; done) > $OUT/snap.txt 2>&1 &
timeout -k 10 200 python3 runner.py --op int4_gemm --no-plots --output-dir $R/int4_gemm > $R/int4.log 2>&1
echo "int4 default rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < $R/int4.log | grep -v "^\s*$" | tail -6 | cut -c1-300
python3 -c "
import json; m=json.load(open('/tmp/runs/int4_gemm/metadata.json')); print('wall_s', m.get('wall_s')); print(m.get('phase_s'))" 2>&1 | tail -3
grep -c . $R/int4_gemm/rows.jsonl
head -c 3000 $R/int4_gemm/errors.log 2>/dev/null
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 $(( 520 - (t1-t0) )) python3 runner.py tune --op split_k_gemm --backends triton --budget-s 560 --stop-after-s $(( 500 - (t1-t0) )) > $R/tune.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/tune.log | grep -v "^\s*$" | tail -5 | cut -c1-300
tar czf $OUT/configs_h200.tgz -C qgemm_bench/configs h200
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
