#!/usr/bin/env bash
# Session 29 x2 calls 2 and 3 (the same warm x2): a 2-GPU bring-up from nothing (fresh Triton and Inductor
# caches) into its own store, in two pieces: `bash call2_bringup.sh`, then on the same machine
# `RESUME=1 LIMIT=400 STOP=330 bash call2_bringup.sh` (the store and its .tune journal stay in /tmp/s2 there:
# the journal's folder did not come back through the device tool).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
export TRITON_CACHE_DIR=/tmp/bring/triton TORCHINDUCTOR_CACHE_DIR=/tmp/bring/inductor
[ -z "${RESUME:-}" ] && rm -rf /tmp/bring
S=/tmp/s2; [ -z "${RESUME:-}" ] && rm -rf $S; mkdir -p $S
t0=$(date +%s)
timeout -k 10 ${LIMIT:-585} torchrun --standalone --nproc-per-node 2 runner.py tune --store $S --stop-after-s ${STOP:-500} ${RESUME:+--resume} > /tmp/tune2.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-t0 )) s"
tr '\r' '\n' < /tmp/tune2.log | grep -v "^\s*$" | tail -15 | cut -c1-250
mkdir -p $OUT/s2 && cp -r $S/. $OUT/s2/ && cp /tmp/tune2.log $OUT/
