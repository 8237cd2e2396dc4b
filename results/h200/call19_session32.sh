#!/usr/bin/env bash
# Session 32 (2026-11-29): what ran, in order. Steps a-c on GPUs 0 and 1 of one nvidia-h200-x2 host
# (each step one process on its own GPU, the two side by side), d-f on one fresh nvidia-h200.
# pre.sh: install the wheels, compile bytecode once, restore the Helion store the last call left.
# ---- pre.sh
# sourced by every call: install, env, bytecode, the store a previous call on this machine left behind
if [ ! -e /tmp/site.done ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1; touch /tmp/site.done; fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
if [ -d $R/store_h200 ]; then cp $R/store_h200/*.json qgemm_bench/configs/h200/; echo "store restored from the last call"; fi
save() { [ -z "${NO_STORE_SAVE:-}" ] && { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; }; tar czf $OUT/${SAVE_NAME:-runs}.tgz -C /tmp runs; }
t0=$(date +%s)
# ---- a (GPU 0): s32c.sh, decode-size WS tiles
# Session 32, one H200 (~4 min): issue 53's decode-size WS tiles (71b18ab), int4 and NVFP4 at K = N = 8192,
# M 1 and 16, against the run's own kernel (--triton), each checked against fp32 first.
T="--tiles 16x64x128s8+split2 --tiles 16x64x128s6+split4 --tiles 16x128x128s6+split2 --tiles 16x128x128s4+split4 --tiles 16x64x128s8+k2"
timeout -k 5 200 python3 scripts/ws_ab.py --shape 1,8192,8192 --shape 16,8192,8192 --triton $T --rounds 3 > $R/ws_ab_int4_m1_16.txt 2>&1
echo "int4 rc $? wall $(( $(date +%s)-t0 )) s"; cat $R/ws_ab_int4_m1_16.txt | cut -c1-150 | tail -30; save
timeout -k 5 150 python3 scripts/ws_ab.py --op nvfp4_gemm --shape 1,8192,8192 --shape 16,8192,8192 --triton $T --rounds 3 > $R/ws_ab_nvfp4_m1_16.txt 2>&1
echo "nvfp4 rc $? wall $(( $(date +%s)-t0 )) s"; cat $R/ws_ab_nvfp4_m1_16.txt | cut -c1-150 | tail -30; save
# ---- b (GPU 1, beside a): s32a.sh, helion_ab frag 256, Helion M 32/64 tunes, int4 decode preset
# Session 32 call 1 (one H200, ~9 min): issue 55's frag question at M = 256 / 1024 (helion_ab --frag-rows 256:
# the entry on 4 warps and in fragment order, each checked first), then the decode presets (after 1d81f81: Helion
# at M = 2-8 takes its own M = 1 / 16 buckets; M = 32 buckets tuned first), every backend -> results/h200/*.
timeout -k 5 150 python3 scripts/helion_ab.py --op int4_gemm --m 256,1024 --rounds 2 --frag-rows 256 > $R/helion_ab_int4_frag256.txt 2>&1
echo "helion_ab rc $? wall $(( $(date +%s)-t0 )) s"
grep -E "^(int4|nvfp4)|^ +[0-9]|WRONG|Error" $R/helion_ab_int4_frag256.txt | cut -c1-110 | head -30; save
# The decode preset's M = 32 rows ran the Triton table's config, untimed in Helion; int4 M = 64 again, now that a
# unit times the H200's own entry and its frag twin first (2c5b4fa: 64x8192x8192 kept 34.0 us, its twin ran 30.0).
for spec in "int4_gemm 32,64 160" "nvfp4_gemm 32 85"; do
  set -- $spec; t1=$(date +%s)
  timeout -k 10 $(( $3 + 15 )) python3 runner.py tune --op $1 --backends helion --helion-layers --ms $2 --stop-after-s $3 > $R/tune_m$2_$1.log 2>&1
  echo "tune M $2 $1 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/tune_m$2_$1.log | grep -E "^(int4|nvfp4)_gemm \(|WRONG|^tuned" | tail -17 | cut -c1-160; save
done
step() {  # folder, need_s, runner args...
  local f=$1 need=$2; shift 2; local left=$(( 555 - ($(date +%s)-t0) ))
  [ $left -lt $need ] && { echo "$f skipped: $left s left"; return; }
  local t1=$(date +%s)
  timeout -k 10 $left python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
  echo "$f rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/$f.log | cut -c1-200; save
}
step int4_gemm_decode 150 --op int4_gemm --shapes decode
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- c: x32d.sh, NVFP4 decode preset + NVFP4 m-sweep on GPU 0 beside the int4 m-sweep on GPU 1
# Session 32 x2 call 3: s32b's runs split over the two GPUs, separate processes, on s32a's store.
step() {  # folder, need_s, runner args...
  local f=$1 need=$2; shift 2; local left=$(( 555 - ($(date +%s)-t0) ))
  [ $left -lt $need ] && { echo "$f skipped: $left s left"; return; }
  local t1=$(date +%s)
  timeout -k 10 $left python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
  echo "$f rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/$f.log | cut -c1-200
}
( export CUDA_VISIBLE_DEVICES=0; step nvfp4_gemm_decode 125 --op nvfp4_gemm --shapes decode; step nvfp4_gemm_msweep 110 --op nvfp4_gemm --shapes m-sweep --repeats 3 ) > $R/d0.out 2>&1 &
( export CUDA_VISIBLE_DEVICES=1; step int4_gemm_msweep 130 --op int4_gemm --shapes m-sweep --repeats 3 ) > $R/d1.out 2>&1
wait; cat $R/d0.out $R/d1.out; save
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- d (one H200, d0d9d7d): s32e.sh, Helion int4 M 256 re-tune, int4 default run
# Session 32 last call (one fresh H200, ~8 min): Helion int4 M 256 buckets re-tuned with the 4-warp frag twin
# (d0d9d7d), then the int4 default run on that store -> results/h200/int4_gemm (issue 55's by-M ratios; 56's wall_s).
t1=$(date +%s)
timeout -k 10 200 python3 runner.py tune --op int4_gemm --backends helion --helion-layers --ms 256 --stop-after-s 185 > $R/tune_m256.log 2>&1
echo "tune M 256 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/tune_m256.log | grep -E "^int4_gemm \(|WRONG|^tuned" | tail -10 | cut -c1-200; save
left=$(( 520 - ($(date +%s)-t0) )); t1=$(date +%s)
timeout -k 10 $left python3 runner.py --op int4_gemm --output-dir $R/int4_gemm > $R/int4_gemm.log 2>&1
echo "int4 default rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/int4_gemm.log | cut -c1-250; save
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- e: s32f.sh, int4 m-sweep on d's store
# Session 32, same warm H200 after s32e: the int4 m-sweep (3 rounds, every backend) on s32e's store.
timeout -k 10 230 python3 runner.py --op int4_gemm --shapes m-sweep --repeats 3 --output-dir $R/int4_gemm_msweep > $R/int4_gemm_msweep.log 2>&1
echo "int4 msweep rc $? wall $(( $(date +%s)-t0 )) s"; tail -2 $R/int4_gemm_msweep.log | cut -c1-250; save
# ---- f: the NVFP4 default run
timeout -k 5 190 python3 runner.py --op nvfp4_gemm --output-dir $R/nvfp4_gemm > $R/nvfp4_gemm.log 2>&1
