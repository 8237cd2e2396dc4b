#!/usr/bin/env bash
# Session 35 (2026-11-29): what ran, in order, on one fresh nvidia-h200 kept warm between the calls (commit
# 4385166; carry [".gpu"], .gpu/whl holding the wheels of ../shared/scripts/fetch_gpu_wheels.sh). Device time:
# 1710 of 1800 s.
# ---- pre.sh (sourced by every call): install once per machine, bytecode once, then the store an earlier call left
if [ ! -e /tmp/site.done ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1; touch /tmp/site.done; fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
# ---- calls 1-3: the one-GPU bring-up from nothing (fresh machine: empty Triton, Inductor and Helion caches) into
# its own store, in three pieces because one command may run 600 s: `STOP=470 bash`, then `RESUME=1 STOP=540` twice.
# The store and its .tune journal stay in /tmp/s1 between the pieces; the last s1.tgz is bringup_store_1gpu/.
S=/tmp/s1
[ -z "${RESUME:-}" ] && { rm -rf $S; mkdir -p $S; }
t1=$(date +%s)
timeout -k 10 $(( ${STOP:-470} + 20 )) python3 runner.py tune --store $S --stop-after-s ${STOP:-470} ${RESUME:+--resume} > $R/tune_$t1.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t1 )) s (piece started $t1)"
tr '\r' '\n' < $R/tune_$t1.log | grep -v "^\s*$" | tail -12 | cut -c1-250
tar czf $OUT/s1.tgz -C $S . && cp $R/tune_$t1.log $OUT/
# ---- call 4: the SCALE8 / fused_ab tests on a GPU host, then the decode probe at 4096 x 4096
timeout 130 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_fused_ab.py tests/test_scale8.py  # 19 deselected: none is marked gpu
timeout 200 python3 scripts/decode_probe.py --formats int4,nvfp4 --no-sweep --k 4096 --n 4096 --out $OUT/probe_4096x4096.txt
# ---- call 5: the same tests unmarked (they run on the GPU host's Triton 3.6), the probe at 8192 x 57344
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_fused_ab.py tests/test_scale8.py
timeout 170 python3 scripts/decode_probe.py --formats int4,nvfp4 --no-sweep --k 8192 --n 57344 --out $OUT/probe_8192x57344.txt
# ---- call 6: the failing smoke's own output; call 7: scale8's tests alone; call 8: one piece of `pytest -m gpu`
timeout 100 python3 scripts/fused_ab.py --cpu-smoke
timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_scale8.py
timeout 270 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_int4_gemm.py
