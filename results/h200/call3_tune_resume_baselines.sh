#!/usr/bin/env bash
# Finish the H200 tune (--resume), then the H200 baselines, one job list per GPU.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit) NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=/tmp/runs; mkdir -p $R
t0=$(date +%s)
timeout 110 torchrun --nproc-per-node 4 runner.py tune --resume --stop-after-s 75 > $R/tune_resume.log 2>&1
echo "resume rc $? wall $(( $(date +%s)-t0 )) s"
tar czf $OUT/h200.tgz -C qgemm_bench/configs h200
T=$(( 545 - ($(date +%s)-t0) ))
echo "baselines get $T s"
(CUDA_VISIBLE_DEVICES=0 timeout $T python3 runner.py --op int4_gemm --no-plots --output-dir $R/int4_gemm > $R/g0.log 2>&1) &
(CUDA_VISIBLE_DEVICES=1 timeout $T python3 runner.py --op int4_gemm --shapes m-sweep --repeats 3 --backends cublas,tinygemm,fbgemm,gemlite,humming,triton,helion --no-plots --output-dir $R/int4_gemm_msweep > $R/g1.log 2>&1;
 CUDA_VISIBLE_DEVICES=1 timeout $(( 545 - ($(date +%s)-t0) )) python3 runner.py --op int4_gemm --shapes decode --backends tinygemm,fbgemm,humming,triton --no-plots --output-dir $R/int4_gemm_decode >> $R/g1.log 2>&1) &
(CUDA_VISIBLE_DEVICES=2 timeout $T python3 runner.py --op nvfp4_gemm --shapes m-sweep --repeats 3 --backends cublas,humming,triton,helion --no-plots --output-dir $R/nvfp4_gemm_msweep > $R/g2.log 2>&1;
 CUDA_VISIBLE_DEVICES=2 timeout $(( 545 - ($(date +%s)-t0) )) python3 runner.py --op nvfp4_gemm --backends cublas,humming,triton,helion --no-plots --output-dir $R/nvfp4_gemm >> $R/g2.log 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout $T python3 runner.py --op split_k_gemm --no-plots --output-dir $R/split_k_gemm > $R/g3.log 2>&1) &
wait
echo "all wall $(( $(date +%s)-t0 )) s"
tar czf $OUT/runs.tgz -C /tmp runs
for f in $R/*.log; do echo "=== $f"; tr '\r' '\n' < $f | grep -E "wall time|^results|error|Error|rc " | tail -6; done
