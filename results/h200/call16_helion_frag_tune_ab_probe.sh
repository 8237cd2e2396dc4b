#!/usr/bin/env bash
# Session 29 call D (one H200): Helion int4 layer buckets at M 1,16,64 with the frag twins (3fb58c9), then
# helion_ab at M 1,16,64 (the tuned buckets and their frag twins against triton), then the probe's HALVES rows.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
timeout -k 10 180 python3 runner.py tune --op int4_gemm --backends helion --helion-layers --ms 1,16,64 --stop-after-s 160 > $R/tune_helion.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t0 )) s"; tr '\r' '\n' < $R/tune_helion.log | grep -E "frag|InvalidConfig|WRONG|^tuned" | tail -30 | cut -c1-220
cp -r qgemm_bench/configs/h200 $R/store_h200
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 5 170 python3 scripts/helion_ab.py --op int4_gemm --m 1,16,64 --rounds 2 > $R/helion_ab_frag.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^int4|triton  |helion entry|frag|WRONG" $R/helion_ab_frag.txt | cut -c1-140 | head -40
tar czf $OUT/runs.tgz -C /tmp runs
left=$(( 560 - ($(date +%s)-t0) ))
timeout -k 5 $left python3 scripts/decode_probe.py --formats int4 --no-sweep --out $R/probe_halves.txt > $R/probe_halves.log 2>&1
echo "probe rc $?"; grep -E "halves|S4 kernel|S3 dot|S1 read|WRONG" $R/probe_halves.txt | cut -c1-140
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
