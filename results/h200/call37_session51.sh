#!/usr/bin/env bash
# Session 51 (2026-11-30): what ran, in order, each `source .gpu/s51<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200-x2, carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's for B, C and D).
# A at 086515d on a fresh machine (pytest -m gpu; the regs pass at M = 1, committed as 7fee9f3); B at 7fee9f3 on
# another fresh machine (int4 decode preset and m-sweep, Llama-3-8B, NVFP4 decode preset); C at 7fee9f3 on B's
# machine (the regs pass at M = 16-64, committed as 044dee3, and the NVFP4 m-sweep; its three other runs found
# B's folders and did not run: rc 2); D on C's machine (those three runs under new names); E on D's machine
# (Llama-3-70B TP2). Device time: about 1580 of 1800 s.
# ---- call A: source .gpu/s51a.sh
# Session 51 call A (x2, BUDGET s; under the call's limit_s). GPU 0: `pytest -m gpu` over the int4 and
# weight-only-config files in a copy of the tree (the M = 4 tie going to M1, bbfd79e, never ran on a GPU), then
# the rest of the GPU tests if time is left. GPU 1: the regs pass (register caps 96/80/72 against none) at int4
# M = 1, its check (30 calls an entry), then the same at NVFP4 M = 1. The store comes back in the tarball.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
( cd /tmp/tree_t && t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 $(( $(left) - 150 )) \
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_int4_gemm.py tests/test_weight_only_configs.py \
    > $R/pytest_int4_woc.txt 2>&1; echo "pytest int4+woc rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^FAILED|passed|failed" $R/pytest_int4_woc.txt | cut -c1-200 | tail -8
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 $(( $(left) - 15 )) \
    python3 -m pytest -m gpu -q -p no:cacheprovider tests --ignore tests/test_int4_gemm.py \
    --ignore tests/test_weight_only_configs.py > $R/pytest_rest.txt 2>&1; echo "pytest rest rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "^FAILED|passed|failed" $R/pytest_rest.txt | cut -c1-200 | tail -8 ) &
PASS_GPU=1
pass regs_int4 regs --formats int4 --ms 1
pass check_int4 check --formats int4 --paths fused --ms 1 --calls 30
pass regs_nvfp4 regs --formats nvfp4 --ms 1
pass check_nvfp4 check --formats nvfp4 --paths fused --ms 1 --calls 30
git diff --stat -- qgemm_bench/configs/h200/ 2>/dev/null | tail -1
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s51b.sh
# Session 51 call B (x2, BUDGET s; under the call's limit_s), at the commit of call A's store (the regs pass at
# M = 1): GPU 0 the int4 decode preset then the int4 m-sweep (3 rounds), every peer (carry fbgemm's wheel);
# GPU 1 Llama-3-8B at batch 1 and 16 (the committed run's command), then the NVFP4 decode preset if time is left.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
( run1 0 int4_gemm_decode --op int4_gemm --shapes decode; wait
  run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
( run1 1 model_llama-3-8b --model llama-3-8b --quant int4-g128 --batch 1,16 --compile default \
    --backends bf16,triton,tinygemm,fbgemm --lm-head --attention flex --pdl; wait
  grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b/report.md | cut -c1-120
  grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b/report.md | cut -c1-230
  [ $(left) -gt 150 ] && { run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait; } ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s51c.sh
# Session 51 call C (x2, BUDGET s; under the call's limit_s), at 7fee9f3 (call A's M = 1 caps): GPU 1 the regs
# pass at M = 16, 32, 64 (int4, then NVFP4; entries whose WS tiles run are not touched) and its check (30 calls an
# entry); then, with the store it left, the int4 decode preset + m-sweep (GPU 0) and the NVFP4 decode preset +
# m-sweep (GPU 1), 3 rounds on the sweeps, every peer (carry fbgemm's wheel). The store comes back in the tarball.
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
PASS_GPU=1
pass regs_m16_int4 regs --formats int4 --ms 16,32,64
pass regs_m16_nvfp4 regs --formats nvfp4 --ms 16,32,64
pass check_m16 check --paths fused --ms 16,32,64 --calls 30
save
( run1 0 int4_gemm_decode --op int4_gemm --shapes decode; wait
  run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
( run1 1 nvfp4_gemm_decode --op nvfp4_gemm --shapes decode; wait
  run1 1 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3; wait ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s51d.sh
# Session 51 call D (x2, BUDGET s; on call C's machine, its store restored): call C's int4 decode preset + m-sweep
# (GPU 0) and NVFP4 decode preset (GPU 1), which found call B's folders there and did not run (rc 2: the runner
# keeps an existing output folder), under new folder names. Every peer (carry fbgemm's wheel).
BUDGET=${BUDGET:-260} source results/h200/gpu_common.sh
( run1 0 int4_gemm_decode_d --op int4_gemm --shapes decode; wait
  run1 0 int4_gemm_msweep_d --op int4_gemm --shapes m-sweep --repeats 3; wait ) &
( run1 1 nvfp4_gemm_decode_d --op nvfp4_gemm --shapes decode; wait ) &
wait; NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: source .gpu/s51e.sh
# Session 51 call E (x2, BUDGET s; on call D's machine, its store restored: call C's): Llama-3-70B TP2 at batch 1,
# bf16 and triton int4-g128, flex attention (session 50 call D's command), with the M = 1 register caps (its
# rank's 8192x5120, 8192x28672 and 8192x128256 entries changed).
BUDGET=${BUDGET:-440} source results/h200/gpu_common.sh
M70="--model llama-3-70b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex --pdl"
t1=$(date +%s); timeout -k 10 $(( $(left) - 12 )) $RUN runner.py $M70 --output-dir $R/m70_e > $R/m70_e.log 2>&1
echo "70B TP2 rc $? wall $(( $(date +%s)-t1 )) s"
grep -A4 "^| variant  *| batch 1" $R/m70_e/report.md | cut -c1-120
grep -A4 "^| variant  *|   batch |   step ms" $R/m70_e/report.md | cut -c1-230
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
