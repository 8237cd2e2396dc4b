#!/usr/bin/env bash
# Session 28 call 5 (the same warm H200, after call 14): test_warm on the GPU, then helion_ab at M 16, 64 with
# helion.json as call 14 tuned it (copied into the tree first).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/helion*.whl .gpu/whl/filecheck*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
R=/tmp/runs5; mkdir -p $R
timeout -k 5 50 python3 -m pytest -q -x -p no:cacheprovider -m "not gpu" tests/test_warm.py > $R/warm.log 2>&1; echo "test_warm rc $?"; tail -2 $R/warm.log
timeout -k 5 60 python3 scripts/helion_ab.py --m 16,64 --op int4_gemm --kn 8192,8192 --rounds 1 > $R/helion_ab.txt 2>&1
echo "rc $?"; grep -E "^int4|triton  |helion entry|acc_scale True  " $R/helion_ab.txt | cut -c1-120
tar czf $OUT/runs5.tgz -C /tmp runs5
