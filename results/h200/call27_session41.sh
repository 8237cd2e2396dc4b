#!/usr/bin/env bash
# Session 41 (2026-11-30): what ran, in order, on nvidia-h200-x2 machines (carry [".gpu"]: .gpu/whl the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers, .gpu/commit the tree's commit; each call sources
# gpu_common.sh beside this file), `source .gpu/s41<x>.sh` each:
# A, B and C each on a fresh machine: A at 624b382 (its M = 64 ws and pdl passes committed as 3d7d991),
# B at 3d7d991, C at f4a1501; D at f4a1501 on C's machine, still warm; E (one H200, BUDGET=150) at 128c11c,
# its store committed as 64fd015. Device time: 1681 of 1800 s.
# ---- call A: source .gpu/s41a.sh
# Session 41 call A (x2, BUDGET s), planned in session 40: GPU 0 the GPU stream-K tests (b24871f's 64-row tile),
# then the ws pass at M = 64 (both formats; the pool's new 64x128x128 stream-K tile against each entry), the pdl
# pass after it (the pool's tiles carry no PDL) and the check; GPU 1 Llama-3-8B bf16 | triton int4-g128 at batch 1 and 16 with ecf76dc's listing of the rest's kernels,
# then batch 1 with Inductor's kernels under PDL (TORCHINDUCTOR_ENABLE_PDL=1) and ours without (QGEMM_PDL=0).
BUDGET=${BUDGET:-585} source results/h200/gpu_common.sh
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_int4_gemm.py \
    -k "stream_k" > $R/pytest_sk.log 2>&1; echo "pytest stream_k (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; tail -3 $R/pytest_sk.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 80 )) python3 -m qgemm_bench.tuning.weight_only $R/ws64.json ws --ms 64 \
    > $R/ws64.log 2>&1; echo "ws pass M 64 (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "fused M64" $R/ws64.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 60 )) python3 -m qgemm_bench.tuning.weight_only $R/pdl64.json pdl --ms 64 \
    > $R/pdl64.log 2>&1; echo "pdl pass M 64 (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"  # the ws pass's tiles carry no PDL
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 8 )) python3 -m qgemm_bench.tuning.weight_only $R/ws64_check.json check \
    --ms 64 --calls 30 > $R/ws64_check.log 2>&1; echo "check (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; tail -3 $R/ws64_check.log | cut -c1-200 ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 170 )) python3 runner.py --model llama-3-8b --quant int4-g128 --batch 1,16 \
    --compile default --backends bf16,triton --lm-head --attention flex --output-dir $R/model_llama-3-8b_lmhead_flex > $R/model8b.log 2>&1
  echo "model 8B (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -A6 "^## Decode tokens" $R/model_llama-3-8b_lmhead_flex/report.md | cut -c1-120
  grep -B2 -A14 "largest kernels" $R/model_llama-3-8b_lmhead_flex/report.md | cut -c1-160
  python3 -c "import torch._inductor.config as c; print('inductor triton.enable_pdl', getattr(c.triton, 'enable_pdl', 'absent'))"
  # Inductor's kernels with PDL (as vLLM under full CUDA graphs); ours without (their PDL 1/2 let the next kernel
  # start before their own wait, which Inductor's waits, placed only before the previous kernel's outputs, assume not)
  t1=$(date +%s); TORCHINDUCTOR_ENABLE_PDL=1 QGEMM_PDL=0 CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 10 )) python3 runner.py \
    --model llama-3-8b --quant int4-g128 --batch 1 --compile default --backends bf16,triton --lm-head --attention flex \
    --output-dir $R/model8b_inductor_pdl > $R/model8b_pdl.log 2>&1
  echo "model 8B inductor PDL (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"; grep -A6 "^## Decode tokens" $R/model8b_inductor_pdl/report.md | cut -c1-120
  grep -A6 "^| variant" $R/model8b_inductor_pdl/report.md | cut -c1-250 ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: source .gpu/s41b.sh
# Session 41 call B (x2, BUDGET s): on 3d7d991's store (M = 64 stream-K WS tiles), the int4 | NVFP4 decode presets,
# then the int4 | NVFP4 default presets.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
pair 130 int4_gemm_decode --op int4_gemm --shapes decode -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
pair 150 int4_gemm --op int4_gemm -- nvfp4_gemm --op nvfp4_gemm
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: source .gpu/s41c.sh
# Session 41 call C (x2, BUDGET s), at f4a1501: GPU 0 the GPU test of a --pdl compiled step (small Llama, triton,
# flex), then the Llama-3-8B baseline with --pdl (bf16, triton, tinygemm, fbgemm; batch 1, 16); GPU 1 the A/B of
# our kernels under Inductor's PDL: off (QGEMM_PDL=0) against their chained modes, bf16 and triton at batch 1,
# one after the other.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl"
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_compiled_decode.py -k "cuda_graph_on_gpu and triton-flex-True" > $R/pytest_pdl.log 2>&1
  echo "pytest pdl (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/pytest_pdl.log | cut -c1-200
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 10 )) python3 runner.py $M8 --batch 1,16 \
    --backends bf16,triton,tinygemm,fbgemm --output-dir $R/model_llama-3-8b_lmhead_flex_pdl > $R/model8b.log 2>&1
  echo "model 8B --pdl (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -A8 "^## Decode tokens" $R/model_llama-3-8b_lmhead_flex_pdl/report.md | cut -c1-120
  grep -A8 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_lmhead_flex_pdl/report.md | cut -c1-250 ) &
( for v in off chained; do
    t1=$(date +%s); [ $v = off ] && export QGEMM_PDL=0 || unset QGEMM_PDL
    CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 10 )) python3 runner.py $M8 --batch 1 --backends bf16,triton \
      --output-dir $R/model8b_pdl_ours_$v > $R/model8b_pdl_$v.log 2>&1
    echo "model 8B --pdl, ours $v (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"
    grep -A5 "^| variant  *|   batch |   step ms" $R/model8b_pdl_ours_$v/report.md | cut -c1-250
  done ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: source .gpu/s41d.sh
# Session 41 call D (x2, BUDGET s), at f4a1501: Llama-3-70B tensor-parallel over both GPUs with --pdl (bf16, triton;
# batch 1); then two Inductor settings on the 8B --pdl step, one per GPU (bf16, triton, batch 1): coordinate-descent
# tuning of Inductor's kernels (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, as gpt-fast and torchao's decode
# benchmarks set it) and combo kernels (Inductor's combo_kernels, set before runner.py runs).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 10 330 $RUN runner.py --model llama-3-70b --quant int4-g128 --batch 1 --compile default \
  --backends bf16,triton --lm-head --attention flex --pdl --output-dir $R/model_llama-3-70b_pdl > $R/model70b.log 2>&1
echo "70B TP2 --pdl rc $? wall $(( $(date +%s)-t1 )) s"
grep -A5 "^## Decode tokens" $R/model_llama-3-70b_pdl/report.md | cut -c1-120; save
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --batch 1 --backends bf16,triton"
( t1=$(date +%s); TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 10 )) \
    python3 runner.py $M8 --output-dir $R/model8b_pdl_cdt > $R/model8b_cdt.log 2>&1
  echo "8B --pdl coordinate descent (GPU 0) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -A4 "^| variant  *|   batch |   step ms" $R/model8b_pdl_cdt/report.md | cut -c1-250 ) &
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(( $(left) - 10 )) python3 -c "
import runpy, sys
import torch._inductor.config as c
c.combo_kernels = True
sys.argv = ['runner.py'] + sys.argv[1:]
runpy.run_path('runner.py', run_name='__main__')" $M8 --output-dir $R/model8b_pdl_combo > $R/model8b_combo.log 2>&1
  echo "8B --pdl combo kernels (GPU 1) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -A4 "^| variant  *|   batch |   step ms" $R/model8b_pdl_combo/report.md | cut -c1-250 ) &
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: BUDGET=150 source .gpu/s41e.sh (nvidia-h200)
# Session 41 call E (x2, BUDGET s), at the WS_POOL[256] commit: the ws pass at M = 256 (both formats, the three layers of N <= 6144 with K <= 14336; the pool's new
# 64x128x128 tile against each entry), then the check of the M = 256 entries.
BUDGET=${BUDGET:-200} source results/h200/gpu_common.sh
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 30 )) python3 -m qgemm_bench.tuning.weight_only $R/ws256.json ws --layers 4096x4096,4096x6144,14336x4096 \
  --ms 256 > $R/ws256.log 2>&1; echo "ws pass M 256 rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "fused M256" $R/ws256.log | cut -c1-330
t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( $(left) - 5 )) python3 -m qgemm_bench.tuning.weight_only $R/ws256_check.json check \
  --ms 256 --layers 4096x4096,4096x6144,14336x4096 --calls 30 > $R/ws256_check.log 2>&1; echo "check rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/ws256_check.log | cut -c1-200
save; echo "all wall $(( $(date +%s)-t0 )) s"
