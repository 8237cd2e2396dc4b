#!/usr/bin/env bash
# Session 27 call 2 (nvidia-h200, carry .gpu): the default int4 run from cold caches, then the same run again
# (warm caches: the warm-up's stamp, Helion's stored code), both complete and with plots; then helion_ab.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
echo "dont_write_bytecode=$(python3 -c 'import sys;print(sys.flags.dont_write_bytecode)') PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-unset}"
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
echo "torch site $SP writable=$([ -w $SP/torch ] && echo yes || echo no) pyc_dirs=$(find $SP/torch -maxdepth 2 -name __pycache__ | wc -l)"
# A pip install compiles bytecode; this image ships none (and may forbid writing it): compile it once,
# into a prefix, as a user's install would have it.
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
t=$(date +%s); timeout 90 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
echo "compileall $(( $(date +%s)-t )) s"
t0=$(date +%s)
timeout -k 10 290 python3 runner.py --op int4_gemm --output-dir $R/int4_cold > $R/cold.log 2>&1
echo "int4 cold rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < $R/cold.log | grep -E "^wall time|terminated|compiled|skipped" | cut -c1-400
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 200 python3 runner.py --op int4_gemm --output-dir $R/int4_warm > $R/warm.log 2>&1
echo "int4 warm rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/warm.log | grep -E "^wall time|terminated|compiled|skipped" | cut -c1-400
tar czf $OUT/runs.tgz -C /tmp runs
left=$(( 580 - ($(date +%s)-t0) ))
if [ $left -gt 60 ]; then
  timeout -k 5 $left python3 scripts/helion_ab.py > $R/helion_ab.txt 2>&1
  echo "helion_ab rc $?"; tail -22 $R/helion_ab.txt | cut -c1-250
fi
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
