#!/usr/bin/env bash
# Session 60 (2026-12-01): what ran, in order, each `bash .gpu/s60<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200 (fresh for each), carrying the whole git-ignored .gpu/ folder (commit, scripts, the wheels of
# ../shared/scripts/fetch_gpu_wheels.sh but transformers'; fbgemm's re-zipped by gpu_prep.sh) and, for B,
# .gpu/split_k_s60a.json (call A's tuned table). A at 5df0417 (reduce_planes sums every plane count as a tile),
# B at bd2fcfe (the tile from 32 planes only), C at 64bc3ec (B's split-K table committed), D at 7ef149c (Helion's
# plane sum on the tile too), E at 18903d5. Calls: A-E with no env (a first try of D found no machine to start).
# Device time: about 1610 of 1800 s.
# Results: split_k_tune_s60/ (A's and B's split-K tunes: logs and every timing; B's table is the store's
# split_k.json, 64bc3ec), split_k_gemm_s60a/ (A's preset), split_k_gemm_s60b/ (B's), int4_gemm_msweep/ and
# nvfp4_gemm_msweep/ (B),
# pytest_gpu/*_s60a_5df0417.txt (A), split_k_order_s60/ (C), split_k_gemm/ (D, replacing B's),
# pytest_gpu/split_k_s60d_7ef149c.txt (D), ws_ab/ws_ab_m256_64rows.txt (E).

# ---- call A: bash .gpu/s60a.sh
s60a() {
# Session 60 call A (nvidia-h200, BUDGET s): the split-K family re-tuned after 5df0417 (reduce_planes loads a
# program's planes at once), the split-K preset on that store, then `pytest -m gpu` on the split-K files and the set
# session 59 call E did not finish (test_int4_gemm.py, test_weight_only_configs.py).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
t1=$(date +%s)
timeout -k 5 $(( $(left) - 300 )) python3 -m qgemm_bench.tuning.split_k $R/split_k_s60a.json --retune --keep-faster \
  --limit-s 250 > $R/split_k_s60a.log 2>&1
echo "split-K tune rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/split_k_s60a.log | grep -E "WRONG|rror|kept|->|wrote" | tail -12 | cut -c1-200
[ -s $R/split_k_s60a.json ] && cp $R/split_k_s60a.json qgemm_bench/configs/h200/split_k.json
run1 0 split_k_gemm --op split_k_gemm
python3 - <<'PY'
import pandas as pd
df = pd.read_csv("/tmp/runs/split_k_gemm/results.csv"); ok = df[df.status == "ok"]
p = ok.pivot_table(index=["M", "K", "N"], columns="backend", values="p50_us")
r = p.triton_deterministic / p.triton
print("det/atomic <= 1.15:", int((r <= 1.15).sum()), "of", len(r), "| triton <= 0.8 torch:", int((p.triton <= 0.8 * p.torch).sum()))
print(pd.concat([p[["triton", "triton_deterministic", "torch"]], r.rename("det/t")], axis=1).round(3).sort_values("det/t").tail(8).to_string())
print("not ok:", df[df.status != "ok"][["M", "K", "N", "backend", "status"]].to_string() if (df.status != "ok").any() else 0)
PY
save
pt() { local n=$1; shift; local t1=$(date +%s); [ $(left) -gt 40 ] || { echo "skipped pytest $n: $(left) s left"; return; }
  ( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 $(( $(left) - 15 )) \
    python3 -m pytest -m gpu -q -p no:cacheprovider $XD "$@" > $R/pytest_${n}_s60a_$C.txt 2>&1 )
  echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_${n}_s60a_$C.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_${n}_s60a_$C.txt | cut -c1-220 | head; }
pt split_k tests/test_split_k_gemm.py tests/test_split_k_reduce.py
pt int4_woc tests/test_int4_gemm.py tests/test_weight_only_configs.py
save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call B: bash .gpu/s60b.sh
s60b() {
# Session 60 call B (nvidia-h200, BUDGET s), at bd2fcfe (reduce_planes' tile sum from 32 planes only): the
# split-K shapes whose deterministic ratio call A left highest re-tuned (every candidate, --keep-faster, on call
# A's store), the split-K preset on that store; then the int4 and NVFP4 m-sweeps (3 rounds, every peer) on the
# store as committed (their last runs predate session 54's ws pass at M = 128 / 256).
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
cp .gpu/split_k_s60a.json qgemm_bench/configs/h200/split_k.json  # call A's tune
t1=$(date +%s)
timeout -k 5 150 python3 -m qgemm_bench.tuning.split_k $R/split_k_s60b.json --base qgemm_bench/configs/h200/split_k.json \
  --no-preset --shapes 1x4096x128 16x4096x64 32x4096x32 16x14336x16 16x14336x128 16x65536x16 --retune --keep-faster \
  --limit-s 130 > $R/split_k_s60b.log 2>&1
echo "split-K tune rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/split_k_s60b.log | grep -E "WRONG|rror|keeps|wrote| us \|" | tail -14 | cut -c1-250
[ -s $R/split_k_s60b.json ] && cp $R/split_k_s60b.json qgemm_bench/configs/h200/split_k.json
run1 0 split_k_gemm_b --op split_k_gemm
python3 - <<'PY'
import pandas as pd
df = pd.read_csv("/tmp/runs/split_k_gemm_b/results.csv"); ok = df[df.status == "ok"]
p = ok.pivot_table(index=["M", "K", "N"], columns="backend", values="p50_us")
r = p.triton_deterministic / p.triton
print("det/atomic <= 1.15:", int((r <= 1.15).sum()), "of", len(r), "| triton <= 0.8 torch:", int((p.triton <= 0.8 * p.torch).sum()))
print(pd.concat([p[["triton", "triton_deterministic", "torch"]], r.rename("det/t")], axis=1).round(3).sort_values("det/t").tail(6).to_string())
print("not ok:", int((df.status != "ok").sum()))
PY
save
run1 0 int4_gemm_msweep --op int4_gemm --shapes m-sweep --repeats 3
run1 0 nvfp4_gemm_msweep --op nvfp4_gemm --shapes m-sweep --repeats 3
save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call C: bash .gpu/s60c.sh (carrying .gpu/commit, the script and the helion and filecheck wheels)
s60c() {
# Session 60 call C (nvidia-h200, BUDGET s), at the commit in .gpu/commit: why the split-K preset's triton row at
# 256x8192x256 ran 9.9 us where triton_deterministic, the same config (the atomic entry is the deterministic
# winner), ran 8.0 (two runs, sessions 44 and 60): those shapes and two more, every split-K backend, 4 rounds (the
# order reversed every other round), each round's p50 printed.
BUDGET=${BUDGET:-300} source results/h200/gpu_common.sh
run1 0 sk_order --op split_k_gemm --shape 256,8192,256 --shape 64,8192,64 --shape 256,16384,256 --shape 16,65536,16 \
  --repeats 4
python3 - <<'PY'
import json
d = json.load(open("/tmp/runs/sk_order/results.json"))
for r in d["rows"]:
    print(f'{r["M"]}x{r["K"]}x{r["N"]:<6} {r["backend"]:22} p50 {r["p50_us"]:7.3f}  rounds', " ".join(f"{x:7.3f}" for x in r["round_p50_us"]))
PY
grep -E "^- .*triton" /tmp/runs/sk_order/report.md | head -8 | cut -c1-200
save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call D: bash .gpu/s60d.sh (carrying .gpu/commit, the script and the helion and filecheck wheels; a first
# attempt found no machine to start)
s60d() {
# Session 60 call D (nvidia-h200, BUDGET s), at the commit in .gpu/commit (Helion's reduce_planes with the tile of
# planes): `pytest -m gpu` on the split-K files, then the split-K preset in 2 rounds (the backends' order reversed
# in the second: does 256x8192x256's triton row, 9.9 us in the 1-round presets, follow its place in the order?).
BUDGET=${BUDGET:-420} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
t1=$(date +%s)
( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 150 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
  tests/test_split_k_gemm.py tests/test_split_k_reduce.py > $R/pytest_split_k_s60d_$C.txt 2>&1 )
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_split_k_s60d_$C.txt | cut -c1-160)"
grep -E "^FAILED|^ERROR" $R/pytest_split_k_s60d_$C.txt | cut -c1-220 | head
run1 0 split_k_gemm_d --op split_k_gemm --repeats 2
python3 - <<'PY'
import json
import pandas as pd
d = json.load(open("/tmp/runs/split_k_gemm_d/results.json"))
rows = pd.DataFrame(d["rows"]); ok = rows[rows.status == "ok"]
p = ok.pivot_table(index=["M", "K", "N"], columns="backend", values="p50_us")
r = p.triton_deterministic / p.triton; h = p.helion_deterministic / p.helion
print("det/atomic <= 1.15:", int((r <= 1.15).sum()), "of", len(r), "| triton <= 0.8 torch:", int((p.triton <= 0.8 * p.torch).sum()),
      "| helion det/atomic max %.3f" % h.max())
for _, x in ok[(ok.M == 256) & (ok.K == 8192) | (ok.M == 64) & (ok.K == 8192) & (ok.N == 64)].iterrows():
    print(f'{x.M}x{x.K}x{x.N} {x.backend:22} p50 {x.p50_us:7.3f} rounds', " ".join(f"{v:7.3f}" for v in x.round_p50_us))
print(pd.concat([p[["triton", "triton_deterministic", "helion", "helion_deterministic"]], r.rename("det/t"), h.rename("hdet/h")],
                axis=1).round(3).sort_values("hdet/h").tail(6).to_string())
print("not ok:", int((rows.status != "ok").sum()))
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"
}

# ---- call E: bash .gpu/s60e.sh (18903d5; carrying .gpu/commit, the script and the helion and filecheck wheels; its
# output written straight to $OUT: ws_ab/ws_ab_m256_64rows.txt)
s60e() {
# Session 60 call E (nvidia-h200, about 250 s): do 64-row x tiles (no split; the WS pool at M = 256 has 128- and
# 256-row ones only) beat the entry at int4 256x4096x4096 and 256x4096x6144, where cuBLAS leads (issue 52)?
# scripts/ws_ab.py, 2 rounds, 5 checked calls each, with the run's triton kernel and cuBLAS; output straight to $OUT.
W=$(for w in .gpu/whl/*.whl; do echo $w; done)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $W > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout -k 5 200 python3 scripts/ws_ab.py --shape 256,4096,4096 --shape 256,4096,6144 --triton --cublas --rounds 2 \
  --calls 5 --tiles 64x128x64s6 --tiles 64x128x64s6+mg4 --tiles 64x128x128s4+mg4 --tiles 128x128x64s4+split2+skew4+pdl \
  2>&1 | tee $OUT/ws_ab_m256_64rows.txt | grep -vE "^\s*$" | tail -30
}
