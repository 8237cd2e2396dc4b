#!/usr/bin/env bash
# Session 57 (2026-12-01): what ran, in order, each `bash .gpu/s57<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200 (fresh for A, E and F, warm from A through D), carrying the whole git-ignored .gpu/ folder (commit,
# scripts, the wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers'; fbgemm's re-zipped by
# gpu_prep.sh). A-E at 0c8b383 (E also carried .gpu/m8cfg.json, committed as helion_ab/m8_s57/config.json: call D's autotuned Helion config for
# int4 M8_K4096_N6144 with frag, acc_scale, tiled and PDL off); F at 7bdf09a (the Helion M = 8 buckets).
# Calls: A (no env), B (MIB unset: A's prefetch lost at every amount), C with ATTN=triton (B: ours faster at both
# batches), D with BUDGET=560, E with BUDGET=480, F with BUDGET=270. Device time: about 1712 of 1800 s.
# Call A ran prefetch_ab.py from scripts/ (removed with the prefetch after it); its copy beside the results is named.
# ---- call A: bash .gpu/s57a.sh
# Session 57 call A (nvidia-h200, BUDGET s), prepared in session 56 at 2581b6b. 1) GPU tests of the decode
# attention's PDL launch (35735ed) and L2 prefetch rows (fe1ca3b, 2581b6b): tests/test_decode_attention.py on CUDA
# (not gpu-marked) and -m gpu tests/test_compiled_decode.py (every case); a failure stops
# the call. 2) prefetch_ab.py: 8B triton int4-g128, committed flags, --attention triton, batch 1 and 16,
# 0 / 8 / 24 / 40 MiB a layer, 3 rounds on one captured step a batch.
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/test_decode_attention.py > $R/pytest_s57a_attn.txt 2>&1
rc1=$?; echo "pytest decode_attention rc $rc1: $(tail -1 $R/pytest_s57a_attn.txt)"
timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_compiled_decode.py > $R/pytest_s57a.txt 2>&1
rc=$?; echo "pytest -m gpu rc $rc wall $(( $(date +%s)-t1 )) s: $(tail -1 $R/pytest_s57a.txt)"; grep -hE "^FAILED|^ERROR" $R/pytest_s57a*.txt | head -8
if [ $rc -ne 0 ] || [ $rc1 -ne 0 ]; then NO_STORE_SAVE=1 save; echo "stopped: the GPU tests failed"; return 0 2>/dev/null || exit 0; fi
t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 results/h200/compile_ab/attention_s57/prefetch_ab.py --mib 0,8,24,40 --rounds 3 -- --model llama-3-8b \
  --quant int4-g128 --backends triton --batch 1,16 --compile default --lm-head --pdl > $R/prefetch_ab_s57a.txt 2>&1
echo "prefetch_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -v "^\s*$" $R/prefetch_ab_s57a.txt | grep -v Warning | tail -34 | cut -c1-150
if [ $(left) -gt 100 ]; then  # 3) our attention alone at new tiles (BLOCK_N 128, 2 and 8 warps), if time is left
  t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 scripts/flex_ab.py --case 1,32,8 --case 16,32,8 --split 8 \
    --rounds 2 > $R/attn_ab_s57a.txt 2>&1; echo "flex_ab rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-100 $R/attn_ab_s57a.txt
fi
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call B: bash .gpu/s57b.sh
# Session 57 call B (nvidia-h200, BUDGET s): issue 54, 8B triton int4-g128, committed flags, batch 1,16, one host:
# --attention flex / triton (launched with PDL since 35735ed) / triton with QGEMM_ATTN_PREFETCH_MIB=$MIB (call A's
# best; unset MIB: skipped). Three runs of ~150-190 s: no second flex run (session 56: flex 2.487 / 3.023 and
# 2.496 / 3.023 ms on one host, stable to 0.4%).
BUDGET=${BUDGET:-570} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --pdl --backends triton --batch 1,16"
show() { grep -A6 "^| variant  *|   batch |   step ms" $R/$1/report.md | grep -E "^\| triton" | cut -c1-200
  grep -A12 "^The attention's largest kernels" $R/$1/report.md | grep -E "^\| triton" | cut -c1-200; }
run1 0 m8_flex1 $M8 --attention flex; show m8_flex1
run1 0 m8_tri $M8 --attention triton; show m8_tri
if [ -n "${MIB:-}" ]; then QGEMM_ATTN_PREFETCH_MIB=$MIB run1 0 m8_tri_pf$MIB $M8 --attention triton; show m8_tri_pf$MIB; fi
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call C: bash .gpu/s57c.sh
# Session 57 call C (nvidia-h200, BUDGET s; gpu_prep.sh --fbgemm): Llama-3-8B, the committed run's command with
# the attention call B found fastest (ATTN; MIB: QGEMM_ATTN_PREFETCH_MIB with triton), every variant, batch 1, 16.
BUDGET=${BUDGET:-540} source results/h200/gpu_common.sh
M8="--model llama-3-8b --quant int4-g128 --compile default --lm-head --attention ${ATTN:-flex} --pdl"
[ -n "${MIB:-}" ] && export QGEMM_ATTN_PREFETCH_MIB=$MIB
run1 0 model_llama-3-8b_s57c $M8 --batch 1,16 --backends bf16,triton,tinygemm,fbgemm
grep -A6 "^| variant  *| batch 1" $R/model_llama-3-8b_s57c/report.md | cut -c1-120
grep -A10 "^| variant  *|   batch |   step ms" $R/model_llama-3-8b_s57c/report.md | cut -c1-260
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call D: bash .gpu/s57d.sh
# Session 57 call D (nvidia-h200, BUDGET s; only if ~450 s are left): issue 55's three rows where Helion's code,
# not warp roles, is the larger cost (session 55, docs/helion.md): int4 g128 8x4096x6144, 256x4096x4096,
# 256x4096x6144. Helion's own autotuner (quick, 110 s a shape) with --save-configs, beside triton in the same run;
# the store comes back (save) to be compared with the committed entries (helion_ab --entry-only next).
BUDGET=${BUDGET:-450} source results/h200/gpu_common.sh
for s in 8,4096,6144 256,4096,4096 256,4096,6144; do
  run1 0 helion_at_${s//,/x} --op int4_gemm --shape $s --backends helion,triton --autotune quick --autotune-budget 110 \
    --save-configs --repeats 1
  grep -E "^\| (helion|triton) " $R/helion_at_${s//,/x}/report.md | head -3 | cut -c1-160
done
cp qgemm_bench/configs/h200/helion.json $R/helion_after_s57d.json
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call E: bash .gpu/s57e.sh
# Session 57 call E (nvidia-h200, BUDGET s): issue 55's decode M = 8 row (8x4096x6144, helion / triton 1.26 in the
# committed decode preset: M = 16's config at M = 8). Helion's own quick autotune (call D) found a [32, 8] split-8
# one-warp config there (9.5 us against triton 8.6 in its run); scripts/helion_ab.py --entry-only times it (plain:
# frag, acc_scale, tiled, PDL off, as autotuned) beside the store's entry and triton at M = 4 and 8, every decode
# layer (8B and 70B), 3 rounds, 10 checked calls, one process a layer.
BUDGET=${BUDGET:-500} source results/h200/gpu_common.sh
CFG=$(cat .gpu/m8cfg.json)
for kn in 4096,6144 4096,4096 4096,28672 14336,4096 8192,10240 8192,8192 8192,57344 28672,8192; do
  [ $(left) -gt 40 ] || { echo "skipped $kn: $(left) s left"; continue; }
  t1=$(date +%s); timeout -k 5 $(( $(left) - 15 )) python3 scripts/helion_ab.py --op int4_gemm --m 4,8 --kn $kn --entry-only \
    --rounds 3 --check-calls 10 --config "$CFG" > $R/m8_${kn/,/x}.txt 2>&1
  echo "== $kn rc $? wall $(( $(date +%s)-t1 )) s"; grep -vE "Warning|warn|^\s*$" $R/m8_${kn/,/x}.txt | tail -9 | cut -c1-150
done
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call F: bash .gpu/s57f.sh
# Session 57 call F (nvidia-h200, BUDGET s): the int4 decode preset, every backend, with the Helion M = 8 buckets
# (the store at .gpu/commit): replaces results/h200/int4_gemm_decode/ (session 51's run, one round).
BUDGET=${BUDGET:-280} source results/h200/gpu_common.sh
run1 0 int4_gemm_decode --op int4_gemm --shapes decode
awk '/helion \/ triton \(p50/,0' $R/int4_gemm_decode/report.md | sed -n 3,12p
NO_STORE_SAVE=1 save; echo "all wall $(( $(date +%s)-t0 )) s"
