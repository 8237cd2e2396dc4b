#!/usr/bin/env bash
# Exploratory call 1 on 2 H200s: where we stand with the H100 entry as fallback,
# humming check, compiled 8B decode. Each job list on its own GPU, in parallel.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
R=/tmp/runs; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $R/smi.txt
B=torch,cublas,tinygemm,fbgemm,humming,triton,helion
(CUDA_VISIBLE_DEVICES=0 timeout 240 python3 runner.py --op int4_gemm --shapes m-sweep --no-plots --backends $B --output-dir $R/int4_msweep > $R/g0.log 2>&1;
 CUDA_VISIBLE_DEVICES=0 timeout 150 python3 runner.py --op split_k_gemm --no-plots --output-dir $R/splitk >> $R/g0.log 2>&1;
 CUDA_VISIBLE_DEVICES=0 timeout 120 python3 runner.py --op nvfp4_gemm --shapes m-sweep --no-plots --backends torch,cublas,triton,helion,humming --output-dir $R/nvfp4_msweep >> $R/g0.log 2>&1) &
(CUDA_VISIBLE_DEVICES=1 timeout 150 python3 scripts/check_humming.py --op int4_gemm --groups 128,channel > $R/g1.log 2>&1;
 CUDA_VISIBLE_DEVICES=1 timeout 90 python3 scripts/check_humming.py --op nvfp4_gemm --backends humming,triton >> $R/g1.log 2>&1;
 CUDA_VISIBLE_DEVICES=1 timeout 280 python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default --backends bf16,triton,tinygemm --decode-steps 50 --output-dir $R/model8b >> $R/g1.log 2>&1) &
wait
tar czf $OUT/runs.tgz -C /tmp runs
for f in $R/*.log; do echo "=== $f"; grep -v -i warn $f | tail -30; done
