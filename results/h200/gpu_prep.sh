#!/usr/bin/env bash
# Run here (no GPU), in the tree's root, before a session's device calls: puts the wheels the GPU machine lacks
# into .gpu/whl (git-ignored; ../shared/scripts/fetch_gpu_wheels.sh downloads them into .whl), writes
# .gpu/commit (gpu_common.sh reads it) and prints the `carry` list for the call's script, with what the call
# carries in all against the 64 MiB limit. transformers' wheel stays out (the tree would not fit with fbgemm's).
# Usage: bash results/h200/gpu_prep.sh .gpu/s52a.sh [--fbgemm]   (--fbgemm: runs with fbgemm's rows)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
script=${1:?usage: gpu_prep.sh .gpu/SCRIPT.sh [--fbgemm]}; fb=${2:-}
[ -f "$script" ] || { echo "error: $script: no such file" >&2; exit 2; }
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
names="filecheck gemlite helion humming_kernels"; [ "$fb" = --fbgemm ] && names="$names fbgemm_gpu_genai"
for n in $names; do ls .whl/$n-*.whl > /dev/null 2>&1 || { bash ../shared/scripts/fetch_gpu_wheels.sh > /dev/null; break; }; done
rm -rf .gpu/whl && mkdir -p .gpu/whl
for n in $names; do cp .whl/$n-*.whl .gpu/whl/; done
# fbgemm's wheel is 36 MB deflated, the tree 28 MB: over 64 MiB together. Its .so re-zipped as LZMA (which
# pip's zipfile reads) is 9.5 MB; made once (about 35 s) and kept in .whl/lzma/.
for w in .gpu/whl/fbgemm_gpu_genai-*.whl; do
  [ -e "$w" ] || continue; small=.whl/lzma/$(basename "$w")
  [ -e "$small" ] || python3 - "$w" "$small" <<'PY'
import os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(dst), exist_ok=True)
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst + ".part", "w") as zo:
    for i in zi.infolist():
        zo.writestr(i, zi.read(i), compress_type=zipfile.ZIP_LZMA if i.file_size > 1 << 20 else zipfile.ZIP_DEFLATED)
os.replace(dst + ".part", dst)
PY
  cp "$small" "$w"
done
git rev-parse --short HEAD > .gpu/commit
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "note: uncommitted changes travel too; .gpu/commit names HEAD"
carry=(.gpu/commit "$script" .gpu/whl/*.whl)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1); extra=$(du -cb "${carry[@]}" | tail -1 | cut -f1)
echo "carried: tree $(( tree >> 20 )) MiB + .gpu $(( extra >> 20 )) MiB of 64"
[ $(( tree + extra )) -lt $(( 64 << 20 )) ] || echo "warning: over 64 MiB: the call will refuse it"
python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${carry[@]}"
