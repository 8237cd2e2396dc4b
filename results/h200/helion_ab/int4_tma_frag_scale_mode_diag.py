"""Session 45 call G: why tests/test_int4_gemm.py::test_helion_every_path_bf16 returned ~1e29 at
(300, 1024, 2048) per-channel scales and (512, 2048, 1000) unscaled on the H200 (call F), where both take
the stored M512_K4096_N4096 entry ([64, 256] by TMA, fragment order, 4 warps, x K-innermost from M = 128).
Per shape and scale mode (and group 128, which passed), that entry and its variants (no frag, pointer
loads, 8 warps, [64, 128], the non-PTX decode), 3 calls each against fp64 (output:
int4_tma_frag_scale_mode_diag.txt). Run from the tree root with PYTHONPATH=$PWD."""

from qgemm_bench.backends import helion_ops
from qgemm_bench.backends.helion_kernels import tuning
from qgemm_bench.operators import int4_gemm
from qgemm_bench.operators.common import rel_error
from qgemm_bench.operators.formats import INT4
from tests.support import DEV, DT, case, fp64

entry = {"block_sizes": [64, 256], "block_k": 128, "decode_asm": True, "num_warps": 4, "num_stages": 3,
         "split_k": 1, "tma": True, "indexing": "tensor_descriptor", "frag": True}
pointer = {k: v for k, v in entry.items() if k not in ("tma", "indexing")}
variants = {"entry": entry, "no frag": {**entry, "frag": False}, "pointer": pointer,
            "pointer no frag": {**pointer, "frag": False}, "w8": {**entry, "num_warps": 8},
            "[64, 128]": {**entry, "block_sizes": [64, 128]}, "no asm": {**entry, "decode_asm": False},
            "acc_scale": {**entry, "acc_scale": True}}
for shape, group in (((300, 1024, 2048), "channel"), ((512, 2048, 1000), None), ((300, 1024, 2048), 128),
                     ((300, 1024, 2048), 64)):
    inputs = int4_gemm.make_inputs(case(int4_gemm, shape, DT, DEV, group_size=group), 1234)
    ref = fp64(inputs.x, int4_gemm.dequantize(inputs))
    errs = []
    for name, cfg in variants.items():
        with tuning.options(explicit=cfg):
            g = helion_ops.WeightOnly("int4_gemm", inputs.w, inputs.scales, None, INT4, inputs.group_size)
            got = [rel_error(g(inputs.x), ref) for _ in range(3)]
            ran = g.bound(inputs.x).config
        same = all(ran.get(k) == v for k, v in cfg.items())
        errs.append(f"{name} {max(got):.2e}" + ("" if same else f" (ran {ran})"))
    print(f"{shape} group {group} path {g.path(shape[0])}: " + "; ".join(errs), flush=True)
