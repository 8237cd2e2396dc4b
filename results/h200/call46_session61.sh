#!/usr/bin/env bash
# Session 61 (2026-12-01): what ran, in order, each `bash .gpu/s61<x>.sh` sourcing gpu_common.sh beside this file,
# on one nvidia-h200, carrying .gpu/commit, the script, the wheels of ../shared/scripts/fetch_gpu_wheels.sh but
# transformers' and fbgemm's, and .gpu/old/split_k_parts.py (f714527's, for the A/B's parent tree).
# A at 296d7c1 (finish's masked lanes zeroed); B, C, D at 6bd3d30 with results/h200/split_k_slot_s61/'s probe
# scripts in the tree (untracked then, committed after); E at 241ac3b with results/h200/split_k_pf_s61/probe_pf.py
# in the tree (the same); F at c329d34 (PF_ROWS a config key, the pf pass); G at 65981a8 (the WS kernel's PDL 2),
# run as `BUDGET=420 bash .gpu/s61g.sh`; H at 65981a8 (`BUDGET=330 bash .gpu/s61h.sh`, carrying fbgemm's wheel:
# gpu_prep.sh --fbgemm). Device time: A about 330 s with the machine's start, B 175, C 115, D 100, E 140, F 360,
# G 165, H 215 (about 1595 of 1800 s).
# Results: pytest_gpu/split_k_s61a_296d7c1.txt, pytest_gpu/finish_s61a_296d7c1.txt, split_k_select_s61/ab.txt
# (the A/B's table, made from the runs' results.json by the summary at the end of call A); split_k_slot_s61/ (B's
# probe_*x*.txt and skinny_triton_report.md, C's probe_pdl_*.txt, D's probe_order_*.txt); split_k_pf_s61/ (E's
# probe_pf.txt, F's pf_pass.log and pf_pass.timings.json: the pass's table is the store's split_k.json, f56bd40);
# split_k_gemm/ (F's preset, the baseline); pytest_gpu/split_k_s61f_c329d34.txt (F); ws_pdl2_s61/ (G's ws_ab runs,
# H's pdl pass and check: the pass's table is the store's weight_only.json, 4a14f8c); pytest_gpu/ws_pdl2_s61g_65981a8.txt
# (G); int4_gemm_m64_256_s61/ (H).

# ---- call A: .gpu/s61a.sh ----
# Session 61 call A (nvidia-h200): `pytest -m gpu` on the split-K files after session 60's review fixes (819963a)
# and on the files whose kernels end in split_k_parts.finish after 296d7c1 (the masked lanes of the last
# program's atomic read zeroed), then the select's cost: 296d7c1 against its parent, one process each, alternated.
BUDGET=${BUDGET:-900} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); echo "xdist: ${XD:-none}"
C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
rm -rf /tmp/tree_o && cp -r /tmp/tree_t /tmp/tree_o && cp .gpu/old/split_k_parts.py /tmp/tree_o/qgemm_bench/backends/triton_kernels/
for f in "split_k:tests/test_split_k_gemm.py tests/test_split_k_reduce.py" \
         "finish:tests/test_fused_norm.py tests/test_model_fused_norm.py tests/test_int4_gemm.py"; do
  n=${f%%:*}; files=${f#*:}; t1=$(date +%s)
  ( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 300 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
    $files > $R/pytest_${n}_s61a_$C.txt 2>&1 )
  echo "pytest $n rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_${n}_s61a_$C.txt | cut -c1-160)"
  grep -E "^FAILED|^ERROR" $R/pytest_${n}_s61a_$C.txt | cut -c1-220 | head
done
save
# The select's cost: parent (o) and 296d7c1 (t) in alternation, 2 rounds each, triton only.
for round in 1 2; do for tr in o t; do
  [ $(left) -lt 60 ] && { echo "A/B stopped: $(left) s left"; break 2; }
  for op in split_k_gemm int4_gemm; do
    if [ $op = split_k_gemm ]; then S="--shape 16,65536,16 --shape 64,8192,64 --shape 256,8192,256 --shape 32,65536,32"
    else S="--shape 1,8192,8192 --shape 1,4096,28672 --shape 4,8192,57344"; fi
    ( cd /tmp/tree_$tr && PYTHONPATH=/tmp/site:/tmp/tree_$tr timeout -k 5 $(( $(left) - 20 )) python3 runner.py --op $op $S \
      --backends triton --repeats 1 --no-plots --output-dir $R/ab_${op}_${tr}$round > $R/ab_${op}_${tr}$round.log 2>&1 )
    echo "ab $op $tr$round rc $?"
  done
done; done
python3 - <<'PY'
import json, glob, collections
t = collections.defaultdict(dict)
for f in sorted(glob.glob("/tmp/runs/ab_*/results.json")):
    tag = f.split("/")[-2]; op, tr = tag[3:-2], tag[-2:]
    rows = json.load(open(f)); rows = rows["rows"] if isinstance(rows, dict) else rows
    for r in rows:
        if r.get("backend") == "triton":
            t[(op, f"{r['M']}x{r['K']}x{r['N']}")][tr] = (r.get("p50_us"), r.get("status"))
print("p50 us, triton: parent o / 296d7c1 t, rounds 1 2")
for k, v in sorted(t.items()):
    print(k, " ".join(f"{tr} {v[tr][0]:.2f}{'' if v[tr][1]=='ok' else ' ' + str(v[tr][1])}" for tr in sorted(v) if v[tr][0]))
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call B: .gpu/s61b.sh ----
# Session 61 call B (nvidia-h200): where split-K 256x8192x256's slow slot comes from. The probe
# (results/h200/split_k_slot_s61/probe.py) at 256x8192x256 and 16x65536x16, then the skinny preset with
# triton alone (one round), where the slot showed in session 60's one-round presets.
BUDGET=${BUDGET:-600} source results/h200/gpu_common.sh
for s in 256,8192,256 16,65536,16; do t1=$(date +%s)
  timeout -k 5 $(( $(left) - 120 )) python3 results/h200/split_k_slot_s61/probe.py $s > $R/slot_probe_$s.txt 2>&1
  echo "probe $s rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-230 $R/slot_probe_$s.txt
done
save
run1 0 skinny_triton_s61b --op split_k_gemm --backends triton --no-plots
python3 - <<'PY'
import json
rows = json.load(open("/tmp/runs/skinny_triton_s61b/results.json"))["rows"]
for r in rows:
    if r["backend"] == "triton" and r["K"] >= 8192 and r["M"] >= 64:
        print(f"{r['M']}x{r['K']}x{r['N']}", r["status"], round(r["p50_us"], 2), r.get("reason", "")[:90], r.get("copies"))
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call C: .gpu/s61c.sh ----
# Session 61 call C (nvidia-h200): does the slot alternation at 256x8192x256 follow the timing call or the
# copies, and PDL? (results/h200/split_k_slot_s61/probe_pdl.py); the same at 16x65536x16 with the deterministic
# backend, whose time over the copies is ~1.15 us over each copy alone (probe.py, call B).
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
for a in "256,8192,256 torch,triton,triton_deterministic,helion" "16,65536,16 triton,triton_deterministic"; do t1=$(date +%s)
  set -- $a
  timeout -k 5 $(( $(left) - 30 )) python3 results/h200/split_k_slot_s61/probe_pdl.py $1 $2 > $R/slot_pdl_$1.txt 2>&1
  echo "probe_pdl $1 rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-330 $R/slot_pdl_$1.txt
done
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call D: .gpu/s61d.sh ----
# Session 61 call D (nvidia-h200): the slow slot and the order of the copies' addresses along the rotation
# (results/h200/split_k_slot_s61/probe_order.py), triton and helion at 256x8192x256.
BUDGET=${BUDGET:-400} source results/h200/gpu_common.sh
for b in triton helion; do t1=$(date +%s)
  timeout -k 5 $(( $(left) - 30 )) python3 results/h200/split_k_slot_s61/probe_order.py 256,8192,256 $b > $R/slot_order_$b.txt 2>&1
  echo "probe_order $b rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-330 $R/slot_order_$b.txt
done
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call E: .gpu/s61e.sh ----
# Session 61 call E (nvidia-h200): the split-K PDL prologue's prefetch depth (split_k_kernel's PF_ROWS) over the
# runner's rotating copies, atomic and deterministic store configs (results/h200/split_k_pf_s61/probe_pf.py).
BUDGET=${BUDGET:-480} source results/h200/gpu_common.sh
t1=$(date +%s)
timeout -k 5 $(( $(left) - 20 )) python3 results/h200/split_k_pf_s61/probe_pf.py --rounds 3 > $R/probe_pf.txt 2>&1
echo "probe_pf rc $? wall $(( $(date +%s)-t1 )) s"; cut -c1-330 $R/probe_pf.txt
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call F: .gpu/s61f.sh ----
# Session 61 call F (nvidia-h200): the split-K GPU tests with PF_ROWS twins, the pf pass over the store's split-K
# table (every entry with PDL 2 or 3 against its 64- and 256-row prefetch twins), then the split-K preset (2 rounds)
# on the table it wrote.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
t1=$(date +%s)
( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 150 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
  tests/test_split_k_gemm.py tests/test_split_k_reduce.py > $R/pytest_split_k_s61f_$C.txt 2>&1 )
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_split_k_s61f_$C.txt | cut -c1-160)"
grep -E "^FAILED|^ERROR" $R/pytest_split_k_s61f_$C.txt | cut -c1-220 | head
t1=$(date +%s)
timeout -k 10 280 python3 -m qgemm_bench.tuning.split_k $R/split_k_pf.json --pf-pass --limit-s 260 > $R/split_k_pf.log 2>&1
echo "pf pass rc $? wall $(( $(date +%s)-t1 )) s"; grep -E "takes it|wrote|limit|rror" $R/split_k_pf.log | cut -c1-250
save
if [ -s $R/split_k_pf.json ] && [ $(left) -gt 150 ]; then
  cp $R/split_k_pf.json qgemm_bench/configs/h200/split_k.json
  run1 0 split_k_gemm_s61f --op split_k_gemm --repeats 2
  python3 - <<'PY'
import json, collections
rows = json.load(open("/tmp/runs/split_k_gemm_s61f/results.json"))["rows"]
t = collections.defaultdict(dict)
for r in rows:
    if r["status"] == "ok":
        t[(r["M"], r["K"], r["N"])][r["backend"]] = r["p50_us"]
cub = "cublas" if any("cublas" in v for v in t.values()) else "torch"
n8 = sum(v["triton"] <= 0.8 * v[cub] for v in t.values() if "triton" in v and cub in v)
d = [(v["triton_deterministic"] / v["triton"], s) for s, v in t.items() if "triton" in v and "triton_deterministic" in v]
print(f"triton <= 0.8x {cub}: {n8} of {len(t)}; det within 1.15x: {sum(x <= 1.15 for x, _ in d)} of {len(d)}; worst",
      sorted(d)[-3:])
PY
else echo "preset skipped: $(left) s left"; fi
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call G: .gpu/s61g.sh ----
# Session 61 call G (nvidia-h200): the WS kernel's PDL 2 (the first weights before the wait): its GPU tests, then
# scripts/ws_ab.py, the store's tiles with PDL 1 (or none) and 2, 3 rounds, one process per shape.
BUDGET=${BUDGET:-560} source results/h200/gpu_common.sh
XD=$(python3 -c "import xdist" 2>/dev/null && echo "-n 4"); C=$(cat .gpu/commit)
rm -rf /tmp/tree_t && mkdir -p /tmp/tree_t && tar cf - --exclude=./.gpu --exclude=./.git . | tar xf - -C /tmp/tree_t
t1=$(date +%s)
( cd /tmp/tree_t && PYTHONPATH=/tmp/site:/tmp/tree_t timeout -k 5 200 python3 -m pytest -m gpu -q -p no:cacheprovider $XD \
  tests/test_int4_gemm.py tests/test_nvfp4_gemm.py \
  -k "ws_pdl or (ws_kernel_vs_fp64 and (tiles17 or tiles18 or tiles19 or tiles10 or tiles11)) or ws_kernel_stamps" \
  > $R/pytest_ws_pdl2_s61g_$C.txt 2>&1 )
echo "pytest rc $? wall $(( $(date +%s)-t1 )) s: $(tail -n 1 $R/pytest_ws_pdl2_s61g_$C.txt | cut -c1-160)"
grep -E "^FAILED|^ERROR" $R/pytest_ws_pdl2_s61g_$C.txt | cut -c1-220 | head
save
ab() { local name=$1; shift; [ $(left) -lt 60 ] && { echo "skipped $name: $(left) s left"; return; }
  t1=$(date +%s); timeout -k 5 $(( $(left) - 30 )) python3 scripts/ws_ab.py --rounds 3 --stall-timeout 60 "$@" > $R/ws_pdl2_$name.txt 2>&1
  echo "ws_ab $name rc $? wall $(( $(date +%s)-t1 )) s"; tail -n 6 $R/ws_pdl2_$name.txt | cut -c1-200; }
ab m16 --shape 16,8192,8192 --tiles 16x64x128s8+split2+acc+pdl --tiles 16x64x128s8+split2+acc+pdl2
ab m64 --shape 64,8192,8192 --tiles 64x128x128s4+split2+skew2+pdl --tiles 64x128x128s4+split2+skew2+pdl2
ab m256_4096 --shape 256,4096,4096 --cublas --tiles 128x128x128s3+split2+skew2 --tiles 128x128x128s3+split2+skew2+pdl --tiles 128x128x128s3+split2+skew2+pdl2
ab m256 --shape 256,8192,8192 --tiles 256x128x64s4+split2+skew4 --tiles 256x128x64s4+split2+skew4+pdl --tiles 256x128x64s4+split2+skew4+pdl2
ab m1024 --shape 1024,8192,8192 --tiles 256x128x64s4 --tiles 256x128x64s4+pdl --tiles 256x128x64s4+pdl2
save; echo "all wall $(( $(date +%s)-t0 )) s"

# ---- call H: .gpu/s61h.sh ----
# Session 61 call H (nvidia-h200): the weight-only pdl pass on the int4 fused entries at M = 64 and 256 (each entry's
# WS tiles without PDL, with PDL 1 and with PDL 2, ws_gemm's early weights: 65981a8), their check (30 calls), then
# those 16 shapes of the int4 default preset with the peers that lead there (3 rounds), on the store it wrote.
BUDGET=${BUDGET:-330} source results/h200/gpu_common.sh
t1=$(date +%s); timeout -k 5 $(( $(left) - 150 )) python3 -m qgemm_bench.tuning.weight_only $R/pdl_s61h.json pdl --paths fused \
  --formats int4 --ms 64,256 > $R/pdl_s61h.log 2>&1
echo "pdl pass rc $? wall $(( $(date +%s)-t1 )) s"; tr '\r' '\n' < $R/pdl_s61h.log | grep -E "fused M|wrote|rror|WRONG" | cut -c1-220 | tail -20
t1=$(date +%s); timeout -k 5 $(( $(left) - 110 )) python3 -m qgemm_bench.tuning.weight_only $R/pdl_s61h_check.json check --formats int4 \
  --paths fused --ms 64,256 --calls 30 > $R/pdl_s61h_check.log 2>&1
echo "check rc $? wall $(( $(date +%s)-t1 )) s"; tail -n 3 $R/pdl_s61h_check.log | cut -c1-200
save
S=""; for m in 64 256; do for kn in 4096,6144 4096,4096 4096,28672 14336,4096 8192,10240 8192,8192 8192,57344 28672,8192; do
  S="$S --shape $m,$kn"; done; done
[ $(left) -gt 100 ] && run1 0 int4_gemm_m64_256_s61h --op int4_gemm $S --backends torch,cublas,fbgemm,humming,triton --repeats 3 --no-plots
python3 - <<'PY'
import json, collections
try:
    rows = json.load(open("/tmp/runs/int4_gemm_m64_256_s61h/results.json"))["rows"]
except OSError:
    raise SystemExit("no preset rows")
t = collections.defaultdict(dict)
for r in rows:
    if r["status"] == "ok":
        t[(r["M"], r["K"], r["N"])][r["backend"]] = r["p50_us"]
for s, v in sorted(t.items()):
    peers = {b: u for b, u in v.items() if b in ("cublas", "fbgemm", "humming")}
    best = min(peers, key=peers.get) if peers else None
    print(s, "triton %.2f" % v.get("triton", float("nan")), "best peer", best, "%.2f" % peers.get(best, float("nan")),
          "AT/UNDER" if best and v.get("triton", 1e9) <= peers[best] else "behind")
PY
save; echo "all wall $(( $(date +%s)-t0 )) s"
