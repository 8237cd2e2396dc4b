# Sourced by each call record from session 40 on (call26_session40.sh and later), on the GPU machine, in the
# tree's root: `BUDGET=<s> source results/h200/gpu_common.sh`. The call carries .gpu/ (git-ignored): .gpu/whl the
# wheels of ../shared/scripts/fetch_gpu_wheels.sh but transformers (over the 64 MiB a call carries with the tree),
# .gpu/commit the commit the tree is at (gpu_prep.sh beside this file makes both and prints the carry list).
# Calls on the same warm machine share /tmp: the wheels install once, and
# the store a previous call tuned is restored (journal too) so the next one goes on from it.
# BUDGET must stay under the limit the device gives the call (the session's device time left, less the machine's
# start on a fresh one): past it the call is killed and nothing comes back (session 49's call F).
W=$(for w in .gpu/whl/*.whl; do [ -e "$w" ] && [ ! -e /tmp/site.$(basename $w).done ] && echo $w; done)  # per wheel: a later call may carry others
if [ -n "$W" ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $W || exit 1; for w in $W; do touch /tmp/site.$(basename $w).done; done; fi
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1 QGEMM_GIT_COMMIT=$(cat .gpu/commit)
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
if [ ! -e /tmp/pyc.done ]; then  # bytecode once a machine: the first import of torch and triton costs seconds a process
  SP=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  timeout 60 python3 -m compileall -q -j 16 -x '/tests?/' $SP /tmp/site $PWD/qgemm_bench $PWD/runner.py > /dev/null 2>&1; touch /tmp/pyc.done
fi
R=/tmp/runs; mkdir -p $R
# The store the last call on this machine left, unless the tree's store changed since that call began (a commit
# between calls, e.g. a merged store, wins over the machine's copy).
TREE_SHA=$(cat qgemm_bench/configs/h200/*.json | sha256sum | cut -c1-16)
if [ -d $R/store_h200 ]; then
  if [ "$(cat $R/store_tree.sha 2>/dev/null)" = "$TREE_SHA" ]; then
    cp -r $R/store_h200/. qgemm_bench/configs/h200/; echo "store restored from the last call (journal too)"
  else echo "store NOT restored: the tree's store changed since the last call on this machine"; rm -rf $R/store_h200; fi
fi
echo $TREE_SHA > $R/store_tree.sha
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); B=${BUDGET:-560}; NG=$(nvidia-smi -L | wc -l)
RUN="python3"; [ "$NG" -ge 2 ] && RUN="torchrun --standalone --nproc-per-node 2"
nvidia-smi --query-gpu=name --format=csv,noheader | head -1

# what comes back: what this call wrote under $R as a tarball (earlier calls' files came back with them); the
# store too, kept for the next call on this machine (NO_STORE_SAVE=1: not)
save() { [ -z "${NO_STORE_SAVE:-}" ] && { rm -rf $R/store_h200; cp -r qgemm_bench/configs/h200 $R/store_h200; }
  tar czf $OUT/${SAVE_NAME:-runs}.tgz -C /tmp --newer-mtime="@$t0" runs; }
left() { echo $(( B - ($(date +%s)-t0) )); }

# run1 GPU FOLDER runner-args...: one benchmark run on one GPU, in the background where there are two
run1() {
  local g=$1 f=$2 t=$(( $(left) - 5 )); shift 2
  [ $t -ge 1 ] || { echo "skipped $f: $(left) s left"; return; }  # timeout 0 would mean no limit
  ( t1=$(date +%s); CUDA_VISIBLE_DEVICES=$g timeout -k 10 $t python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
    local rc=$?; echo "$f (GPU $g) rc $rc wall $(( $(date +%s)-t1 )) s"
    # rc 2 (bad usage, e.g. the folder exists: the runner keeps it) wrote nothing: the log, not an earlier report
    [ $rc -eq 2 ] && { tail -n 2 $R/$f.log | cut -c1-200; exit; }
    grep "at or under the fastest peer" $R/$f/report.md 2>/dev/null | cut -c1-160
    python3 -c "import json;m=json.load(open('$R/$f/metadata.json'));print('$f wall_s', m.get('wall_s'))" 2>/dev/null ) &
  [ "$NG" -lt 2 ] && wait
}

# pair NEED_S FOLDER_A args... -- FOLDER_B args...: two runs side by side (one after the other on one GPU)
pair() {
  local need=$1; shift; [ $(left) -lt $need ] && { echo "skipped $*: $(left) s left"; return; }
  local a=() ; while [ $# -gt 0 ] && [ "$1" != "--" ]; do a+=("$1"); shift; done
  [ $# -gt 0 ] || { echo "pair: no -- between the two runs"; return 1; }; shift
  run1 0 "${a[@]}"; run1 $(( NG >= 2 ? 1 : 0 )) "$@"; wait; save
}

# pass NAME MODE args...: one of tuning/weight_only's passes (ws, pdl, tma, ahead, check, ...) on GPU ${PASS_GPU:-0},
# its log in $R/NAME.log, its decisions printed (call records before session 48 define their own)
pass() {
  local n=$1 mode=$2 t1=$(date +%s); shift 2
  CUDA_VISIBLE_DEVICES=${PASS_GPU:-0} timeout -k 10 $(( $(left) - 20 )) python3 -m qgemm_bench.tuning.weight_only \
    $R/$n.json $mode "$@" > $R/$n.log 2>&1
  echo "$n rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/$n.log | grep -v "^\s*$" | grep -E "fused M|split M|wrote|WRONG|wrong|rror" | cut -c1-200 | tail -20
}

# tune NAME STOP_S tune-args...: `runner.py tune` over every GPU, stopped after STOP_S (RESUME=1: --resume)
tune() {
  local name=$1 stop=$2; shift 2; local t1=$(date +%s)
  [ $stop -lt 40 ] && { echo "skipped $name: $stop s"; return; }
  timeout -k 10 $(( stop + 40 )) $RUN runner.py tune --stop-after-s $stop ${RESUME:+--resume} "$@" > $R/tune_$name.log 2>&1
  echo "tune $name rc $? wall $(( $(date +%s)-t1 )) s"
  tr '\r' '\n' < $R/tune_$name.log | grep -E "WRONG|^tuned|unfinished|no config passed|Error|twin|_gemm \(" | tail -20 | cut -c1-220
  save
}

# gputest NAME STOP_S pytest-args...: `pytest -m gpu -v` (xdist's 4 workers where installed) stopped after STOP_S,
# its log in $R/pytest_NAME_<commit>.txt; prints the summary, failures, and the cases started but not finished
# (a case that hangs: call D of call47_session62.sh; each case also stops at QGEMM_TEST_STALL_S, tests/conftest.py).
gputest() {
  local n=$1 stop=$2 t1=$(date +%s) log; shift 2; log=$R/pytest_${n}_$(cat .gpu/commit).txt
  [ $stop -lt 20 ] && { echo "skipped pytest $n: $stop s"; return; }
  local xd=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4")
  timeout -k 5 $stop python3 -m pytest -m gpu -v -p no:cacheprovider $xd "$@" > $log 2>&1
  echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $log | cut -c1-160)"
  grep -E "^FAILED|^ERROR|crashed while running" $log | cut -c1-220 | head
  python3 - "$log" <<'PY'
import re, sys
started, ended = set(), set()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"(tests/\S+::\S+)", line)
    if m:
        (ended if re.search(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", line) else started).add(m.group(1))
if started - ended:
    print("started, not finished:", " ".join(sorted(started - ended)))
PY
}
