#!/usr/bin/env bash
# Session 28 call 1 (fresh machine, cold caches): E) the cold default int4 run with 14 warm-up workers;
# C) helion_ab at M 1,16,64,1024 (acc_scale/PDL first on a GPU), then decode_probe.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
t=$(date +%s); timeout 90 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
echo "compileall $(( $(date +%s)-t )) s"
R=/tmp/runs; mkdir -p $R; t0=$(date +%s)
timeout -k 10 230 python3 runner.py --op int4_gemm --no-plots --compile-jobs 14 --output-dir $R/int4_j14 > $R/j14.log 2>&1
echo "int4 cold, 14 workers: rc $? wall $(( $(date +%s)-t0 )) s"
python3 -c "import json;m=json.load(open('$R/int4_j14/metadata.json'));print(m.get('wall_s'), m.get('compile_warm_up'), {k: round(v,1) for k,v in m.get('phase_s',{}).items()})" 2>&1 | cut -c1-900
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 5 $(( 500 - (t1-t0) )) python3 scripts/helion_ab.py --m 1,16,64,1024 --op int4_gemm > $R/helion_ab.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; tail -30 $R/helion_ab.txt | cut -c1-220
tar czf $OUT/runs.tgz -C /tmp runs
left=$(( 560 - ($(date +%s)-t0) ))
if [ $left -gt 40 ]; then
  timeout -k 5 $left python3 scripts/decode_probe.py --out $R/probe.txt > $R/probe.log 2>&1
  echo "probe rc $?"; tail -40 $R/probe.txt 2>/dev/null | cut -c1-200
fi
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
