#!/usr/bin/env bash
# Session 37 (2026-11-29): what ran, in order, on one fresh nvidia-h200-x2 kept warm between the calls (commit
# 386834d; carry [".gpu"], .gpu/whl holding the wheels of ../shared/scripts/fetch_gpu_wheels.sh). Device time:
# 1739 of 1800 s in six calls. The Helion store of call 1 is cad56d0's; call 2's NVFP4 M = 32 / 64 tune wrote 30 of
# 32 entries, call 4 the last 2 (9728581: only their fused fallback changed, their WS tile did not). pre.sh restores
# the store, journal included, from /tmp/runs/store_h200 at the start of each call.
# ---- pre.sh (sourced by every call)
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
if [ -d $R/store_h200 ]; then cp -r $R/store_h200/. qgemm_bench/configs/h200/; echo "store restored from the last call (journal too)"; fi
save() { [ -z "${NO_STORE_SAVE:-}" ] && { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; }; tar czf $OUT/${SAVE_NAME:-runs}.tgz -C /tmp runs; }
t0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# ---- call 1: END=500 bash .gpu/s37a.sh (336 s): Helion M 1, 16, 64 re-tune, int4 then NVFP4; helion_ab NVFP4
# Session 37 call 1 (fresh machine, ~560 s): Helion's weight-only buckets at M = 1, 16, 64 re-tuned at every
# Llama layer with the PDL pass (5e48838) and NVFP4's bf16_scales twin (c3d2dcd): 48 units, 7.5 min expected on
# one GPU (3.7 on two: torchrun where two are visible). Then helion_ab NVFP4 M = 1, 16, 64 (bf16_scales switched,
# 3 rounds) if time is left. An unfinished tune: OPS=<op> RESUME=1 END=<s> bash .gpu/s37a.sh (--resume skips what it wrote).
nvidia-smi --query-gpu=name --format=csv,noheader; NG=$(nvidia-smi -L | wc -l)
RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
for op in ${OPS:-int4_gemm nvfp4_gemm}; do
  t1=$(date +%s); left=$(( ${END:-540} - (t1-t0) ))
  if [ $op = nvfp4_gemm ]; then stop=$(( left - 30 )); elif [ "$NG" -ge 2 ]; then stop=150; else stop=250; fi
  timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --op $op --backends helion --ms 1,16,64 --helion-layers \
    --stop-after-s $stop ${RESUME:+--resume} > $R/tune_helion_$op.log 2>&1
  echo "tune helion $op rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/tune_helion_$op.log | grep -E "us with|WRONG|^tuned|unfinished|no config passed|Error" | tail -30 | cut -c1-230
  save
done
left=$(( ${END:-540} - ($(date +%s)-t0) ))
if [ $left -gt 100 ]; then
  t1=$(date +%s); CUDA_VISIBLE_DEVICES=0 timeout -k 5 $(( left - 10 )) python3 scripts/helion_ab.py --op nvfp4_gemm --m 1,16,64 \
    --kn 8192,8192 --rounds 3 > $R/helion_ab_nvfp4_bf16.txt 2>&1
  echo "helion_ab rc $? wall $(( $(date +%s)-t1 )) s"; grep -vi warn $R/helion_ab_nvfp4_bf16.txt | grep -E "^nvfp4|helion|triton" | grep -v "^  " | head -40 | cut -c1-130
  save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 2: bash .gpu/s37c.sh (328 s): NVFP4 M 32, 64 from the whole pool, over both GPUs (30 of 32 entries)
# Session 37 (optional, before s37b's baselines): NVFP4's M = 32 and 64 entries from the whole pool (--full: the
# ACC_SCALE + SHORT_DECODE tiles, which took 9 of 16 M = 1 / 16 entries in session 36's tune; humming is ahead at
# 32x8192x8192, 32x8192x57344, 32x28672x8192, 64x8192x10240, 64x14336x4096): 32 units, 8.3 min expected on one GPU,
# 4.1 on two (torchrun where two are visible). Unfinished: RESUME=1 STOP=<s>.
NG=$(nvidia-smi -L | wc -l); RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
t1=$(date +%s); stop=${STOP:-$(( NG >= 2 ? 300 : 520 ))}
timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --op nvfp4_gemm --backends triton --ms 32,64 --full \
  --stop-after-s $stop ${RESUME:+--resume} > $R/tune_nvfp4_32_64.log 2>&1
echo "tune nvfp4 32,64 rc $? wall $(( $(date +%s)-t1 )) s"
tr '\r' '\n' < $R/tune_nvfp4_32_64.log | grep -E "^nvfp4 (fused )?M|WRONG|^tuned|unfinished|Error" | tail -40 | cut -c1-230
save; echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 3: BUDGET=585 bash .gpu/s37b.sh (559 s): baselines in pairs (GPU 0 | GPU 1), the window A/B, two GPUs
# Session 37 call 2 (the same warm machine; BUDGET s): the baselines Helion's new entries change, then issue 56's
# timing-window A/B. Two GPUs: pairs side by side (GPU 0 | GPU 1); one GPU: one after the other.
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
pair 250 int4_gemm --op int4_gemm -- nvfp4_gemm --op nvfp4_gemm
pair 260 int4_gemm_decode --op int4_gemm --shapes decode -- nvfp4_gemm_decode --op nvfp4_gemm --shapes decode
# issue 56: the same int4 default run with half the timing windows (warm caches, same GPU, one after the other)
if [ $(left) -gt 180 ]; then
  run1 0 int4_gemm_rep50 --op int4_gemm --warmup 10 --rep 50; wait
  run1 0 int4_gemm_rep100 --op int4_gemm; wait; save
  python3 - <<'PY'
import csv, math
def load(p):
    return {(r['M'], r['K'], r['N'], r['backend']): float(r['p50_us']) for r in csv.DictReader(open(p + '/results.csv')) if r['status'] == 'ok'}
import os
b = load('/tmp/runs/int4_gemm_rep100')
for name in ('int4_gemm_rep50', 'int4_gemm'):  # the setting's difference; two runs of one setting (GPU 0 both)
    if not os.path.exists(f'/tmp/runs/{name}/results.csv'):
        continue
    a = load(f'/tmp/runs/{name}')
    r = [a[k] / b[k] for k in a if k in b]
    print(name, '/ rep100 rows', len(r), 'geomean %.4f' % math.exp(sum(map(math.log, r)) / len(r)),
          'min %.3f max %.3f' % (min(r), max(r)), 'beyond 2%%: %d' % sum(abs(x - 1) > 0.02 for x in r))
PY
fi
if [ "$NG" -ge 2 ] && [ $(left) -gt 90 ]; then  # beac93a: the warm-up should find every step the pairs compiled
  t1=$(date +%s); timeout -k 10 $(( $(left) - 5 )) torchrun --standalone --nproc-per-node 2 runner.py --op int4_gemm \
    --output-dir $R/int4_2gpu > $R/int4_2gpu.log 2>&1
  echo "int4 2-GPU rc $? wall $(( $(date +%s)-t1 )) s"
  python3 -c "import json;m=json.load(open('$R/int4_2gpu/metadata.json'));print(m.get('wall_s'), m.get('compile_warm_up'))"
  grep "at or under the fastest peer" $R/int4_2gpu/report.md | cut -c1-160; save
fi
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 4: bash .gpu/s37d.sh; RESUME=1 STOP=110 bash .gpu/s37c.sh (100 s): ncu of the M = 1 fused kernel, the
# last 2 NVFP4 M = 64 entries
# Session 37 (optional, ~3 min; issue 53 "where the time goes"): Nsight Compute's stall reasons for the M = 1
# fused kernel at 1x8192x8192, one launch each (the first checked call; --clock-control none, as METHOD.md says):
# int4's table config, NVFP4's table config and it with SHORT_DECODE (fewer instructions, 18.68 against 18.15 us in
# session 36). Works where the host is Firecracker (KINDS.md); on gVisor ncu says LibraryNotLoaded: then stop.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
one() {  # name op config
  local t1=$(date +%s)
  timeout -k 5 150 $NCU --clock-control none -k regex:fused_kernel -c 1 $S --print-details all --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active" python3 scripts/fused_ab.py --op $2 \
    --shape 1,8192,8192 --config "$3" --calls 1 --rounds 1 > $R/ncu_$1.txt 2>&1
  echo "== $1 ($3) rc $? wall $(( $(date +%s)-t1 )) s"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Issued Ipc|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|LibraryNotLoaded|ERR" $R/ncu_$1.txt | head -20 | cut -c1-150
  grep -E "issue_stalled" $R/ncu_$1.txt | sort -k3 -g -r | head -10 | cut -c1-150
  grep -E "pipe_(alu|fma)" $R/ncu_$1.txt | cut -c1-150  # d5fda7e's hypothesis: SHORT_DECODE's SHFs load the ALU pipe
}
one int4_table int4_gemm table
one nvfp4_table nvfp4_gemm table
one nvfp4_short nvfp4_gemm table+SHORT_DECODE
NO_STORE_SAVE=1 SAVE_NAME=ncu save
echo "all wall $(( $(date +%s)-t0 )) s"
# ---- call 5 (92 s): the NVFP4 m-sweep (GPU 0) and decode preset (GPU 1) on the complete store
source .gpu/pre.sh; ( CUDA_VISIBLE_DEVICES=0 timeout 300 python3 runner.py --op nvfp4_gemm --shapes m-sweep --repeats 3 --output-dir $R/nvfp4_gemm_msweep > $R/nvfp4_msweep.log 2>&1; echo msweep rc $?; grep "at or under" $R/nvfp4_gemm_msweep/report.md | cut -c1-200 ) & ( CUDA_VISIBLE_DEVICES=1 timeout 300 python3 runner.py --op nvfp4_gemm --shapes decode --output-dir $R/nvfp4_gemm_decode2 > $R/nvfp4_decode2.log 2>&1; echo decode rc $?; grep "at or under" $R/nvfp4_gemm_decode2/report.md | cut -c1-200 ) & wait; NO_STORE_SAVE=1 SAVE_NAME=runs5 save; echo all $(( $(date +%s)-t0 ))
# ---- call 6 (231 s, cut by its timeout at ~90% of the file with no failure): the marked tests of one file
source .gpu/pre.sh; timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_int4_gemm.py -x 2>&1 | tail -8 | cut -c1-300; echo all $(( $(date +%s)-t0 ))
