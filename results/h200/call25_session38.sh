#!/usr/bin/env bash
# Session 38 (2026-11-29): what ran, in order, on nvidia-h200-x2 machines (carry [".gpu"], .gpu/whl holding the
# wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers: the tracked tree and all the wheels are over the
# 64 MiB a call carries; the machine's transformers 5.17 ran the model, as session 31's). Device time: 1629 of 1800 s
# in five calls: calls 1-4 on one machine kept warm at b48bf39 (the stores calls 1 and 2 wrote are 907b0ed and
# 3a24522), call 5 on a fresh one at aaa6e2a (its store d4654ac). pre.sh restores the store, journal included, from
# /tmp/runs/store_h200 at the start of each call on the same machine.
# ---- pre.sh (sourced by every call)
# sourced by every call: install, env, bytecode, the store a previous call on this machine left behind
W=$(for w in .gpu/whl/*.whl; do [ -e /tmp/site.$(basename $w).done ] || echo $w; done)  # per wheel: a later call may carry others
if [ -n "$W" ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W || exit 1; for w in $W; do touch /tmp/site.$(basename $w).done; done; fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
if [ -d $R/store_h200 ]; then cp -r $R/store_h200/. qgemm_bench/configs/h200/; echo "store restored from the last call (journal too)"; fi
save() { [ -z "${NO_STORE_SAVE:-}" ] && { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; }; tar czf $OUT/${SAVE_NAME:-runs}.tgz -C /tmp runs; }
t0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# ---- call 1: END=540 source .gpu/s38a.sh (371 s): Helion M 16 --full, then M 1, 32, 64, int4 then NVFP4
# Session 38 call 1 (fresh machine, ~540 s on x2): Helion's weight-only buckets at every Llama layer, per op:
# M = 1, 32, 64 from the pruned pool (the M = 1 units end with the TMA twin pass, bc1b76d; passes run past the
# unit's share, a8782f9), then M = 16 from the whole pool (--full: the pruned M = 16 pool lacks Triton's [128, 16]
# split-8 tile; int4 16x28672x8192 helion 62.9 us against triton 46.6). Unfinished: OPS=<op> RESUME=1 END=<s>.
nvidia-smi --query-gpu=name --format=csv,noheader; NG=$(nvidia-smi -L | wc -l)
RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
E=${END:-550}
tune() {  # name stop_s args...
  local name=$1 stop=$2; shift 2; local t1=$(date +%s)
  [ $stop -lt 40 ] && { echo "skipped $name: $stop s"; return; }
  timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --backends helion --helion-layers --stop-after-s $stop \
    ${RESUME:+--resume} "$@" > $R/tune_$name.log 2>&1
  echo "tune $name rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/tune_$name.log | grep -E "WRONG|^tuned|unfinished|no config passed|Error|twin" | tail -12 | cut -c1-200
  save
}
left() { echo $(( E - ($(date +%s)-t0) )); }
# the M = 16 whole-pool units first (the known gap), then M = 1, 32, 64; each capped at ~1.5x its plan on two GPUs
cap() { local c=$1 l=$(( $(left) - 25 )); echo $(( c < l ? c : l )); }
for op in ${OPS:-int4_gemm nvfp4_gemm}; do tune ${op}_16_full $(cap 130) --op $op --ms 16 --full; done
for op in ${OPS:-int4_gemm nvfp4_gemm}; do tune ${op}_1_32_64 $(cap 190) --op $op --ms 1,32,64; done
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 2: source .gpu/s38e.sh (252 s): int4 Triton M 1, 16, 32 --full, over both GPUs
# Session 38 call 2 (~450 s on x2): int4's Triton entries at M = 1, 16, 32 from the whole pool (--full; they were
# only ever timed on the H100's winners, e.g. M1_K8192_N8192 "best of 6", 15.67 us): 48 units, 4.3 min planned
# on two GPUs. MS= overrides the M; unfinished: RESUME=1 STOP=<s>.
NG=$(nvidia-smi -L | wc -l); RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
t1=$(date +%s); stop=${STOP:-$(( NG >= 2 ? 470 : 540 ))}
timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --op int4_gemm --formats int4 --backends triton --ms ${MS:-1,16,32} --full \
  --stop-after-s $stop ${RESUME:+--resume} > $R/tune_int4_triton_1_16_32.log 2>&1
echo "tune int4 triton ${MS:-1,16,32} rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/tune_int4_triton_1_16_32.log | grep -E "^int4 (fused )?M|WRONG|^tuned|unfinished|Error" | tail -40 | cut -c1-200
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 3: BUDGET=500 AB_S=210 source .gpu/s38b.sh (246 s): helion_ab int4 | NVFP4, then the default pair
# Session 38 call 3 (same warm machine, BUDGET s): helion_ab on Helion's TMA twins at M = 256 / 1024, now that its
# TMA path reads x K-innermost from M = 128 (205b466; offline 310 SASS a K block, 0 spills, against 425 / 79) and at
# M = 1 / 16, int4 on GPU 0 | NVFP4 on GPU 1, 3 rounds, each candidate checked over 30 calls; Triton's M = 1024 tile
# as a config of our own. Then the int4 | NVFP4 default pair on the store the two tunes wrote.
B=${BUDGET:-560}; NG=$(nvidia-smi -L | wc -l)
left() { echo $(( B - ($(date +%s)-t0) )); }
run1() {  # gpu folder runner-args...
  local g=$1 f=$2; shift 2
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(( $(left) - 5 )) python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
    echo "$f (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"
    grep "at or under the fastest peer" $R/$f/report.md 2>/dev/null | cut -c1-160
    python3 -c "import json;m=json.load(open('$R/$f/metadata.json'));print('$f wall_s', m.get('wall_s'))" 2>/dev/null ) &
  [ "$NG" -lt 2 ] && wait
}
pair() {  # need_s folderA argsA... -- folderB argsB...
  local need=$1; shift; [ $(left) -lt $need ] && { echo "skipped $*: $(left) s left"; return; }
  local a=() ; while [ "$1" != "--" ]; do a+=("$1"); shift; done; shift
  run1 0 "${a[@]}"; run1 $(( NG >= 2 ? 1 : 0 )) "$@"; wait; save
}
T='{"block_sizes": [128, 256], "block_k": 128, "split_k": 1, "num_warps": 8, "num_stages": 3, "frag": true, "tma": true}'
ab() {  # gpu op
  local t1=$(date +%s)
  CUDA_VISIBLE_DEVICES=$1 timeout -k 5 ${AB_S:-230} python3 scripts/helion_ab.py --op $2 --m ${AB_M:-256,1024,1,16} --kn 8192,8192 \
    --rounds 3 --frag-rows 256 --check-calls 30 --config "$T" > $R/helion_ab_$2.txt 2>&1
  echo "helion_ab $2 (GPU $1) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -vi warn $R/helion_ab_$2.txt | grep -E "^(int4|nvfp4)|helion|triton|WRONG" | grep -v "^  " | head -40 | cut -c1-140
}
case "${STEPS:-ab default}" in *ab*) ab 0 int4_gemm & ab $(( NG >= 2 ? 1 : 0 )) nvfp4_gemm & wait; NO_STORE_SAVE=1 save ;; esac
case "${STEPS:-ab default}" in *default*) pair 200 int4_gemm --op int4_gemm -- nvfp4_gemm --op nvfp4_gemm ;; esac
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 4: BUDGET=545 source .gpu/s38c.sh (368 s): Llama-3-8B (GPU 0) | decode presets and m-sweeps (GPU 1)
# Session 38 call 4 (same warm machine, BUDGET s): GPU 0 Llama-3-8B decode, bf16 / triton / tinygemm / fbgemm int4-g128,
# lm_head quantized, flex attention, batch 1 and 16, on the int4 entries call 2 re-tuned at M = 1, 16, 32; GPU 1 the
# decode presets and m-sweeps (3 rounds), int4 first. One GPU: the model only.
B=${BUDGET:-560}; NG=$(nvidia-smi -L | wc -l)
left() { echo $(( B - ($(date +%s)-t0) )); }
run1() {  # gpu folder runner-args...
  local g=$1 f=$2; shift 2
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(( $(left) - 5 )) python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
    echo "$f (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"
    grep "at or under the fastest peer" $R/$f/report.md 2>/dev/null | cut -c1-160
    python3 -c "import json;m=json.load(open('$R/$f/metadata.json'));print('$f wall_s', m.get('wall_s'))" 2>/dev/null ) &
  [ "$NG" -lt 2 ] && wait
}
pair() {  # need_s folderA argsA... -- folderB argsB...
  local need=$1; shift; [ $(left) -lt $need ] && { echo "skipped $*: $(left) s left"; return; }
  local a=() ; while [ "$1" != "--" ]; do a+=("$1"); shift; done; shift
  run1 0 "${a[@]}"; run1 $(( NG >= 2 ? 1 : 0 )) "$@"; wait; save
}
( t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( $(left) - 5 )) python3 runner.py --model llama-3-8b --quant int4-g128 \
    --batch 1,16 --compile default --backends ${VARIANTS:-bf16,triton,tinygemm,fbgemm} --lm-head --attention flex \
    --output-dir $R/model_llama-3-8b_lmhead_flex > $R/model8b.log 2>&1
  echo "model 8B rc $? wall $(( $(date +%s)-t1 )) s"; grep -A8 "^## Decode tokens" $R/model_llama-3-8b_lmhead_flex/report.md | cut -c1-120 ) &
if [ "$NG" -ge 2 ]; then
  ( for f in ${PRESETS:-int4_gemm_decode int4_gemm_msweep nvfp4_gemm_decode nvfp4_gemm_msweep}; do
      [ $(left) -lt 100 ] && { echo "skipped $f: $(left) s left"; continue; }
      op=${f%_*}; case $f in *decode) a="--shapes decode" ;; *) a="--shapes m-sweep --repeats 3" ;; esac
      run1 1 $f --op $op $a; wait
    done ) &
fi
wait; save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 5 (fresh machine, at aaa6e2a): BUDGET=385 source .gpu/s38f.sh (236 s): Helion int4 M 256, 1024 TMA pass, int4 default | m-sweep
# Session 38 call 5 (a fresh x2, BUDGET s): int4 Helion M = 256, 1024 at every layer with aaa6e2a's TMA frag twin
# pass (16 units, 1.9 min planned on two GPUs), then the int4 default (GPU 0) | int4 m-sweep (GPU 1) on that store.
NG=$(nvidia-smi -L | wc -l); RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
B=${BUDGET:-560}; NG=$(nvidia-smi -L | wc -l)
left() { echo $(( B - ($(date +%s)-t0) )); }
run1() {  # gpu folder runner-args...
  local g=$1 f=$2; shift 2
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(( $(left) - 5 )) python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
    echo "$f (GPU $g) rc $? wall $(( $(date +%s)-t1 )) s"
    grep "at or under the fastest peer" $R/$f/report.md 2>/dev/null | cut -c1-160
    python3 -c "import json;m=json.load(open('$R/$f/metadata.json'));print('$f wall_s', m.get('wall_s'))" 2>/dev/null ) &
  [ "$NG" -lt 2 ] && wait
}
pair() {  # need_s folderA argsA... -- folderB argsB...
  local need=$1; shift; [ $(left) -lt $need ] && { echo "skipped $*: $(left) s left"; return; }
  local a=() ; while [ "$1" != "--" ]; do a+=("$1"); shift; done; shift
  run1 0 "${a[@]}"; run1 $(( NG >= 2 ? 1 : 0 )) "$@"; wait; save
}
t1=$(date +%s); stop=${STOP:-170}
timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --op int4_gemm --backends helion --ms 256,1024 --helion-layers \
  --stop-after-s $stop ${RESUME:+--resume} > $R/tune_helion_int4_256_1024.log 2>&1
echo "tune helion int4 256,1024 rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/tune_helion_int4_256_1024.log | grep -E "WRONG|^tuned|unfinished|no config passed|Error|int4_gemm \(" | tail -20 | cut -c1-220
save
pair 120 int4_gemm --op int4_gemm -- int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
echo "all wall $(( $(date +%s)-t0 )) s"
