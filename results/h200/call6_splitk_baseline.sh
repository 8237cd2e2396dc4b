#!/usr/bin/env bash
# H200 call 6: the split-K baseline with every backend (results/h200/split_k_gemm), after call 5.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD QGEMM_GIT_COMMIT=$(cat .gpu/commit) PYTHONUNBUFFERED=1
timeout -k 5 170 python3 runner.py --op split_k_gemm --no-plots --output-dir /tmp/sk > /tmp/sk.log 2>&1
echo rc $?
tr '\r' '\n' < /tmp/sk.log | grep -E "^wall time|terminated" | cut -c1-300
tar czf $OUT/sk.tgz -C /tmp sk
