"""The tritonbench entry points called with wrong dtypes or shapes: a
ValueError with a clear one-line message, before anything is prepared."""

import pytest
import torch

from qgemm_bench.integrations import tritonbench as tb
from tests.support import run_script_in_process

X = torch.randn(4, 128, dtype=torch.float16)
W_INT = torch.randint(-8, 8, (128, 64), generator=torch.Generator().manual_seed(0))
W_FLOAT = torch.randn(128, 64, generator=torch.Generator().manual_seed(0))
B16 = W_FLOAT.half()


@pytest.mark.parametrize("call,message", [
    (lambda: tb.triton_int4_gemm_tritonbench(None, X.float(), W_INT), "x must be a float16 or bfloat16 tensor"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, None, W_INT), "x must be a float16 or bfloat16 tensor"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X[:0], W_INT), "is empty"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X, W_FLOAT), "w must be an integer [K, N] tensor"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X, W_INT[0]), "w must be an integer [K, N] tensor"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X, W_INT[:64]), "do not match"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X, W_INT * 20), "int4 values must lie in [-8, 7]"),
    (lambda: tb.triton_int4_gemm_tritonbench(None, X[:, :127], W_INT[:127]), "K=127 is odd"),
    (lambda: tb.triton_nvfp4_gemm_tritonbench(None, X, W_INT), "w must be a floating-point [K, N] tensor"),
    (lambda: tb.triton_nvfp4_gemm_tritonbench(None, X[:, :120], W_FLOAT[:120]), "NVFP4 block size 16"),
    (lambda: tb.triton_nvfp4_gemm_tritonbench(None, X, torch.full((128, 64), float("nan"))), "NaN or inf"),
    (lambda: tb.triton_matmul_split_k_tritonbench(None, X, W_FLOAT), "a and b must share float16 or bfloat16"),
    (lambda: tb.triton_matmul_split_k_tritonbench(None, X.float(), W_FLOAT), "a and b must share float16 or bfl"),
    (lambda: tb.triton_matmul_split_k_tritonbench(None, X, B16[:64]), "do not match"),
    (lambda: tb.triton_matmul_split_k_tritonbench(None, X, B16, B16[0, :3]), "bias (3,) must be [N] = [64]"),
    (lambda: tb.triton_matmul_split_k_tritonbench(None, X[0], B16), "a must be a 2-D tensor"),
])
def test_wrong_inputs_are_a_clear_value_error(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)


WS_SHAPE = ["--shape", "256,8192,8192"]  # scripts/ws_ab.py's shape and tiles
WS_AB = [*WS_SHAPE, "--tiles", "256x128x64s4"]
SCRIPT_CASES = [
    ("tuning/helion.py", ["--m", "abc"], "expected positive integers"),
    ("tuning/helion.py", ["--rep", "nan"], "expected milliseconds from 1 to 1000"),
    ("tuning/weight_only.py", [], "required: OUT.json"),
    ("tuning/weight_only.py", ["/no/such/folder/out.json"], "its folder does not exist"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--ms", "128,300"], "[300] not in the table's M"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ws", "--ms", "64,32"], "[32] not in the table's M"),
    ("fused_sass.py", ["--ws", "--ws-acc", "--group", "channel"], "ACC runs at int4 groups of whole K blocks only"),
    ("fused_sass.py", ["--ws", "--ws-acc", "--group", "32"], "ACC runs at int4 groups of whole K blocks only"),
    ("fused_sass.py", ["--ws-split", "2"],
     "--ws-m-group, --ws-acc and --ws-stamps: the warp-specialized kernel's (--ws)"),
    ("fused_sass.py", ["--ws-stamps", "--ws", "--ws-stream-k", "--tile", "256x128x64"], "not with --ws-stream-k"),
    ("fused_sass.py", ["--ws-pdl"],
     "--ws-m-group, --ws-acc and --ws-stamps: the warp-specialized kernel's (--ws)"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--ms", "x"], "expected comma-separated integers"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--layers", "8192x57344"], "--layers is for the pdl, ws"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ws", "--layers", "8192x57344,abc"], "expected comma-separated KxN"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ws", "--layers", "8192"], "expected KxN pairs"),
    ("tuning/weight_only.py", ["/tmp/o.json", "variants", "--ms", "128"],
     "--ms is for the table, pdl, ws, scale8, tma, rot, ahead, regs and check modes"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--calls", "5"], "--calls is for the check mode"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ws", "--group", "32"],
     "--group is for the ws and check modes with --formats int4"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--group", "32", "--formats", "int4"],
     "--group is for the ws and check modes with --formats int4"),
    ("tuning/weight_only.py", ["/tmp/o.json", "check", "--calls", "0"], "expected a positive number of calls"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ws", "--stall-timeout", "-5"], "argument --stall-timeout: '-5' is out "
                                                                            "of range"),
    ("tuning/weight_only.py", ["/tmp/o.json", "table", "--formats", "int4,fp8"], "expected int4, nvfp4 or int4,nvfp4"),
    ("tuning/weight_only.py", ["/tmp/o.json", "--formats", "nvfp4"],
     "--formats is for the table, pdl, ws, tma, regs and check modes"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ahead", "--formats", "nvfp4"],
     "--formats 'nvfp4': the ahead mode times int4 entries only"),
    ("tuning/weight_only.py", ["/tmp/o.json", "ahead", "--formats", "int4", "--ms", "300"],
     "[300] not in the table's M"),  # --formats naming the mode's one format: taken
    ("tuning/weight_only.py", ["/tmp/o.json", "regs", "--formats", "int4", "--ms", "300"],
     "[300] not in the table's M"),  # regs takes --formats
    ("tuning/weight_only.py", ["/tmp/o.json", "regs", "--calls", "3"], "--calls is for the check mode"),
    ("tuning/weight_only.py", ["/tmp/o.json", "rot", "--formats", "nvfp4,int4", "--ms", "300"],
     "[300] not in the table's M"),  # both formats in either order: the default
    ("path_ab.py", ["--paths", "fused,foo"], "expected a comma-separated subset of split, fused, dequant"),
    ("path_ab.py", ["--shape", "1,2"], "expected three integers"),
    ("path_ab.py", ["--rounds", "0"], "out of range"),
    ("path_ab.py", ["--op", "nvfp4_gemm", "--group-size", "64"], "--group-size is for int4_gemm"),
    ("path_ab.py", [], "needs a CUDA device"),  # the CPU (CI)
    ("fused_sass.py", ["--tile", "16x128"], "expected BLOCK_MxBLOCK_NxBLOCK_K"),
    ("hang_check.py", [], "the following arguments are required: out"),
    ("hang_check.py", ["/tmp/o", "--stall-timeout", "0"], "the check needs the watchdog on"),
    ("hang_check.py", ["/tmp/o"], "needs an H100"),  # the CPU (CI)
    ("ws_ab.py", WS_SHAPE, "the following arguments are required: --tiles"),
    ("ws_ab.py", WS_AB, "ws_ab.py needs a CUDA device"),  # the CPU (CI)
    ("ws_ab.py", [*WS_AB, "--stall-timeout", "nan"], "argument --stall-timeout: must be a finite number"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64"], "expected BMxBNxBKsSTAGES[+splitN][+skewN][+k2][+sk][+pdl[2]]"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64s4+sk+sk"], "+skewN, +k2, +sk, +pdl, +pdl2, +mgN, +acc (each once)"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64s4+split"], "is not one of +splitN, +skewN, +k2, +sk, +pdl"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x100x64s4"], "takes BLOCK_N 64 or 128"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64s4+sk+split2"], "STREAM_K is 1"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64s4+mg17"], "M_GROUP (x-row blocks per group of tiles) is 1 to 16"),
    ("ws_ab.py", [*WS_SHAPE, "--tiles", "256x128x64s4+split2", "--tiles", "256x128x64s4+split2+skew0"],
     "--tiles: the same tiles twice (256x128x64 s4 split 2;"),
    ("ws_ab.py", [*WS_AB, "--variant", "x=/no/such.py"], "no such file"),
    ("ws_ab.py", [*WS_AB, "--stamps", "--cublas"], "--stamps: this checkout's kernel alone"),
    ("ws_ab.py", [*WS_SHAPE, "--stamps", "--tiles", "256x128x64s4+sk"], "--stamps: this checkout's kernel alone"),
    ("ws_ab.py", [*WS_AB, "--copies", "0"], "argument --copies"),
    ("ws_ab.py", [*WS_AB, "--variant", "main=README.md"], "a word other than 'main'"),
    ("ws_ab.py", [*WS_AB, "--variant", "x=README.md"], "does not import (SyntaxError"),
    ("ws_ab.py", [*WS_AB, "--variant", "x=scripts/path_ab.py"], "not a ws_gemm.py"),
    ("ws_ab.py", [*WS_AB, "--op", "nvfp4_gemm", "--group-size", "64"],
     "--group-size is for int4_gemm"),
    ("fused_sass.py", ["--tile", "16x128x128", "--warps", "8", "--split", "2"], "wrong_on_sm90"),
    ("fused_sass.py", ["--tma", "--tma-x"], "one or the other"),
    ("fused_sass.py", ["--k", "1000"], "a multiple of 256"),
    ("fused_sass.py", ["--maxnreg", "7"], "out of range"),
    ("fused_sass.py", ["--group", "48"], "an even integer dividing K=8192"),
    ("fused_sass.py", ["--group", "per-row"], "an even integer dividing K=8192, 'channel' or 'none'"),
    ("fused_sass.py", ["--fmt", "nvfp4", "--group", "64"], "int4 only"),
    ("fused_sass.py", ["--tile", "128x64x128", "--tma", "--group", "32"], "FusedGemm loads these tiles by pointer"),
]
FIRST_CASE = {}  # script -> the index of its first case
for i, (name, _, _) in enumerate(SCRIPT_CASES):
    FIRST_CASE.setdefault(name, i)


@pytest.mark.parametrize("script,args,message", SCRIPT_CASES)
def test_scripts_refuse_bad_usage_in_one_line(script, args, message, request, monkeypatch, capsys):
    import subprocess
    import sys
    from pathlib import Path

    if "needs a CUDA device" in message and torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would run, not refuse")
    repo = Path(__file__).resolve().parent.parent
    path = repo / ("qgemm_bench" if script.startswith("tuning/") else "scripts") / script
    # Each script's first case runs as its own process (its imports, its exit).
    # The other cases differ in their arguments only and run here, on a CPU,
    # where these scripts stop right after their argument checks ("needs a
    # CUDA device"); fused_sass.py, which compiles on a CPU (and changes
    # Triton's state doing so), always runs as its own process.
    here = request.node.callspec.indices["script"] != FIRST_CASE[script] and script != "fused_sass.py" \
        and not torch.cuda.is_available()
    if here:
        monkeypatch.chdir(repo)
        code, _, stderr = run_script_in_process(path, args, monkeypatch, capsys)
    else:
        r = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                           cwd=repo, timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(repo)})
        code, stderr = r.returncode, r.stderr
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], stderr

