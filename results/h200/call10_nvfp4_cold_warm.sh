#!/usr/bin/env bash
# Session 27 call 4 (nvidia-h200, carry .gpu): the default NVFP4 run from cold caches and again warm, both
# complete with plots; then GPU tests not yet run on the H200 for the time left.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
t=$(date +%s); timeout 90 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1
echo "compileall $(( $(date +%s)-t )) s"
t0=$(date +%s)
timeout -k 10 170 python3 runner.py --op nvfp4_gemm --output-dir $R/nvfp4_cold > $R/cold.log 2>&1
echo "nvfp4 cold rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < $R/cold.log | grep -E "^wall time|terminated|compiled|skipped" | cut -c1-400
tar czf $OUT/runs.tgz -C /tmp runs
t1=$(date +%s)
timeout -k 10 100 python3 runner.py --op nvfp4_gemm --output-dir $R/nvfp4_warm > $R/warm.log 2>&1
echo "nvfp4 warm rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/warm.log | grep -E "^wall time|terminated|compiled|skipped" | cut -c1-400
tar czf $OUT/runs.tgz -C /tmp runs
left=$(( 300 - ($(date +%s)-t0) ))
if [ $left -gt 30 ]; then
  timeout -k 5 40 python3 -m pytest -q -rfE -p no:cacheprovider -m "not gpu" tests/test_helion_codecache.py > $R/pytest_cc.log 2>&1
  echo "codecache tests on the GPU rc $?"; tail -3 $R/pytest_cc.log | cut -c1-300
  left=$(( 300 - ($(date +%s)-t0) ))
  timeout -k 5 $left python3 -m pytest -m gpu -q -rfE -p no:cacheprovider tests/test_nvfp4_gemm.py > $R/pytest.log 2>&1
  echo "pytest rc $?"; tail -6 $R/pytest.log | cut -c1-300
fi
tar czf $OUT/runs.tgz -C /tmp runs
echo "all wall $(( $(date +%s)-t0 )) s"
