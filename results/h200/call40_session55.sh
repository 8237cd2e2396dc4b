#!/usr/bin/env bash
# Session 55 (2026-12-01): what ran, in order, each `bash .gpu/s55<x>.sh` sourcing gpu_common.sh beside this
# file, on nvidia-h200 (one GPU: the only kind lent), carrying .gpu/commit, the call's script and the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers' (fbgemm's, re-zipped by gpu_prep.sh, for C). A and B at
# 7c15b66 on one machine; C-H at 9be6e15: C on a fresh machine, D and E on it, F on a fresh one, G and H on F's.
# Device time: about 1543 of 1800 s; a call I (the GPU tests at 583676d) found too little left to start a machine.
# ---- call A: bash .gpu/s55a.sh
# Session 55 call A (nvidia-h200, BUDGET s), prepared in session 54 at 9d3edb5: issue 54. First the GPU tests of
# --fused-norms (298e70b, 847aa95, c1fd836: kernel parts at the 8B decode shapes with the store's configs, the tiny
# bf16 model eager and compiled); a failure stops the call. Then Llama-3-8B triton int4-g128, committed flags, batch
# 1 and 16: plain / --fused-norms / plain (a sandwich on one host), then batch 1 --inductor-config combo_kernels=True.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_fused_norm.py tests/test_model_fused_norm.py > $R/pytest_fused_norm.txt 2>&1
rc=$?; echo "pytest fused norms rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_fused_norm.txt)"
grep -E "^FAILED|^ERROR|Error" $R/pytest_fused_norm.txt | head -8
if [ $rc -ne 0 ]; then NO_STORE_SAVE=1 save; echo "stopped: the GPU tests failed"; return 0 2>/dev/null || exit 0; fi
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --backends triton"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| (bf16|triton)" | cut -c1-250
  grep -E "^\| (bf16|triton)" $R/$1/report.md | grep -E "\| ok " | head -2 | cut -c1-200; }
run1 0 m8_plain1 $M8 --batch 1,16; show m8_plain1
run1 0 m8_fn $M8 --batch 1,16 --fused-norms; show m8_fn
run1 0 m8_plain2 $M8 --batch 1,16; show m8_plain2
NO_STORE_SAVE=1 save
run1 0 m8_combo $M8 --batch 1 --inductor-config combo_kernels=True; show m8_combo
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: bash .gpu/s55b.sh
# Session 55 call B (nvidia-h200): issue 54. Call A measured --fused-norms (2.634 -> 2.536 ms) and
# combo_kernels=True (2.439 ms) apart; here both together, batch 1 and 16, sandwiched by combo alone.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl --backends triton"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| (bf16|triton)" | cut -c1-250; }
run1 0 m8_combo1 $M8 --batch 1,16 --inductor-config combo_kernels=True; show m8_combo1
run1 0 m8_fn_combo $M8 --batch 1,16 --fused-norms --inductor-config combo_kernels=True; show m8_fn_combo
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: bash .gpu/s55c.sh
# Session 55 call C (nvidia-h200, BUDGET s), at 9be6e15 (combo_kernels and the RMSNorms in our GEMMs by default):
# Llama-3-8B, the committed run's command, every variant, batch 1 and 16.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention flex --pdl"
run1 0 model_llama-3-8b_s55c $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s55c/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s55c/report.md | cut -c1-260
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: bash .gpu/s55d.sh
# Session 55 call D (nvidia-h200, BUDGET s): issue 55, the Helion fused kernel's variants against its store
# entry and the triton backend at the two int4 rows without Helion evidence (8 and 256 x 4096 x 6144).
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op int4_gemm --m 8,256 --kn 4096,6144 --entry-only > $R/helion_ab_s55d.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; tail -40 $R/helion_ab_s55d.txt | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: bash .gpu/s55e.sh
# Session 55 call E (nvidia-h200, BUDGET s): issue 55, the Helion fused kernel's variants against its store
# entry and the triton backend every variant, at the worst int4 rows of the committed preset (64 and 256 x 8192 x 10240: 1.34, 1.46).
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op int4_gemm --m 64,256 --kn 8192,10240 > $R/helion_ab_s55e.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; tail -40 $R/helion_ab_s55e.txt | cut -c1-200
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: bash .gpu/s55f.sh
# Session 55 call F (nvidia-h200, BUDGET s): issue 55 item 3, at every other row of the committed H200 presets
# where helion / triton > 1.2 (and int4 64x4096x4096 at 1.195): the Helion store entry, the triton backend (the
# warp-specialized Gluon kernel there) and its entry without warp specialization ("triton no WS"), 2 rounds.
BUDGET=${BUDGET:-450} source results/h200/gpu_common.sh
ab() { local op=$1 m=$2 kn=$3 n=helion_ab_s55f_$1_$3_$2; local t1=$(date +%s)
  [ $(left) -gt 40 ] || { echo "skipped $n"; return; }
  timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op $op --m $m --kn $kn --entry-only > $R/$n.txt 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "^(int4|nvfp4)|^ +[0-9.]+ +[0-9.]+ |rror|WRONG" $R/$n.txt | cut -c1-110; }
ab int4_gemm 64 4096,28672; ab int4_gemm 64 8192,8192; ab int4_gemm 256 14336,4096; ab int4_gemm 64,256 8192,57344
ab int4_gemm 64,256 4096,4096; ab int4_gemm 64 4096,6144
ab nvfp4_gemm 64 4096,28672; ab nvfp4_gemm 64,256 8192,10240; ab nvfp4_gemm 256 14336,4096; ab nvfp4_gemm 64 4096,4096
ab nvfp4_gemm 64 8192,8192
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call G: bash .gpu/s55g.sh
# Session 55 call G (nvidia-h200, BUDGET s), at 9be6e15: the GPU tests of the decode step under the new defaults
# (combo_kernels in compiled steps; RMSNorms in the GEMMs by default).
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py tests/test_model_fused_norm.py tests/test_model.py > $R/pytest_s55g.txt 2>&1
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s55g.txt)"; grep -E "^FAILED|^ERROR" $R/pytest_s55g.txt | head -8
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call H: bash .gpu/s55h.sh
# Session 55 call H (nvidia-h200): call G's one failure (tinygemm compiled step: a cache hit's MultiKernelCall
# read a JITFunction without its hash lock), alone with the machine's Inductor cache, then without the FX graph
# cache, then the full file with a fresh cache dir.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
T="tests/test_compiled_decode.py::test_compiled_step_in_a_cuda_graph_on_gpu"
p() { local n=$1; shift; local t1=$(date +%s); env "$@" timeout -k 5 $(( $(left) - 10 )) python3 -m pytest -m gpu -q -p no:cacheprovider $T > $R/$n.txt 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/$n.txt)"; grep -E "^FAILED|^E  .*Error" $R/$n.txt | head -4 | cut -c1-200; }
p h_cache X=1
p h_nofx TORCHINDUCTOR_FX_GRAPH_CACHE=0
p h_fresh TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fresh
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
