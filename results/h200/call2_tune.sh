#!/usr/bin/env bash
# Bring-up of the H200 by `qgemm-bench tune` on 4 GPUs under torchrun.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit) NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv
N=$(nvidia-smi -L | wc -l)
start=$(date +%s)
timeout 545 torchrun --nproc-per-node $N runner.py tune --stop-after-s ${STOP:-470} ${EXTRA:-} > $OUT/tune.log 2>&1
echo "tune rc $? wall $(( $(date +%s)-start )) s on $N GPUs"
tar czf $OUT/h200.tgz -C qgemm_bench/configs h200
tr '\r' '\n' < $OUT/tune.log | grep -v -i "warn\|^\s*$" | tail -40
