"""Bad input to the model benchmark (--checkpoint, --eval-*), the run folder
and the report: one line naming the culprit, exit 2, nothing measured or
written (docs/faults.md lists every case tried). In-process: runner.main."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import runner

pytest.importorskip("transformers")


def one_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    """A 1-layer Llama checkpoint (safetensors), no tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    path = tmp_path_factory.mktemp("ckpt") / "llama"
    LlamaForCausalLM(cfg).save_pretrained(path)
    return path


def _gpt2(path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=64)).save_pretrained(path)


def make(kind: str, tmp: Path, llama: Path) -> str:
    """A bad checkpoint of the kind named; its path."""
    if kind == "text file":
        (tmp / "notes.txt").write_text("hello\n")
        return str(tmp / "notes.txt")
    if kind == "empty folder":
        (tmp / "empty").mkdir()
        return str(tmp / "empty")
    if kind in ("config without weights", "truncated safetensors", "index naming a missing shard"):
        d = tmp / "ck"
        d.mkdir()
        (d / "config.json").write_text((llama / "config.json").read_text())
        if kind == "truncated safetensors":
            data = (llama / "model.safetensors").read_bytes()
            (d / "model.safetensors").write_bytes(data[: len(data) // 2])
        elif kind == "index naming a missing shard":
            (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "shard-1.safetensors"}}))
        return str(d)
    if kind == "config not JSON":
        (tmp / "ck").mkdir()
        (tmp / "ck" / "config.json").write_text("{oops")
        return str(tmp / "ck")
    if kind == "not GGUF":
        (tmp / "model.gguf").write_bytes(b"PK\x03\x04 a zip, say" * 8)
        return str(tmp / "model.gguf")
    if kind == "GPT-2":
        _gpt2(tmp / "gpt2")
        return str(tmp / "gpt2")
    if kind == "symlink loop":
        (tmp / "loop").symlink_to(tmp / "loop")
        return str(tmp / "loop")
    if kind == "missing":
        return str(tmp / "nowhere")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind,message", [
    ("text file", "notes.txt: a file, not a .gguf; expected a Hugging Face checkpoint folder"),
    ("empty folder", "empty: no config.json (not a Hugging Face checkpoint folder)"),
    ("config without weights", "ck: no weights (model.safetensors or pytorch_model.bin)"),
    ("truncated safetensors", "ck/model.safetensors: truncated: its header describes"),
    ("index naming a missing shard", "ck: shard-1.safetensors is missing (named in model.safetensors.index.json)"),
    ("config not JSON", "ck/config.json: not JSON"),
    ("not GGUF", "model.gguf: not a GGUF file (it does not start with the GGUF magic bytes)"),
    ("GPT-2", "gpt2: not a Llama-architecture model (model_type 'gpt2'; config.json has no hidden_size)"),
    ("symlink loop", "loop: "),
    ("missing", "nowhere: no such file or folder"),
])
def test_a_bad_checkpoint_is_one_line_naming_it(tmp_path, capsys, llama, kind, message):
    path = make(kind, tmp_path, llama)
    capsys.readouterr()  # making it may print progress bars
    out = tmp_path / "run"
    code = runner.main(["--checkpoint", path, "--device", "cpu", "--output-dir", str(out)])
    line = one_line(capsys)
    assert code == 2 and message in line, line
    assert not out.exists()


def test_a_gguf_file_needs_the_gguf_package_or_loads_through_it(tmp_path, capsys):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 32)  # the magic, then nothing usable
    code = runner.main(["--checkpoint", str(fake), "--device", "cpu", "--output-dir", str(tmp_path / "run")])
    line = one_line(capsys)
    try:
        import gguf  # noqa: F401
    except ImportError:  # this machine: transformers needs it to read GGUF at all
        assert code == 2 and line.endswith("model.gguf: reading GGUF needs the gguf package: pip install gguf")
    else:  # gguf installed: its reader's error, in one line
        assert code == 2 and line.startswith(f"error: --checkpoint {fake}: cannot load it ("), line
    assert not (tmp_path / "run").exists()


BASE = ["--device", "cpu", "--batch", "1", "--prompt-len", "4", "--decode-steps", "1", "--quality-tokens", "1x4"]


@pytest.mark.parametrize("args,message", [
    (["--eval-window", "0"], "--eval-window 0: expected an integer >= 2"),
    (["--eval-window", "1"], "--eval-window 1: expected an integer >= 2"),
    (["--eval-stride", "-5"], "--eval-stride -5: expected an integer >= 1"),
    (["--eval-stride", "0"], "--eval-stride 0: expected an integer >= 1"),
    (["--eval-tokens", "0"], "--eval-tokens 0: expected an integer >= 2"),
    (["--eval-window", "64"], "--eval-window: apply to --eval-text's perplexity, which was not asked for"),
    (["--eval-text", ""], "--eval-text '': expected a text file"),
    (["--eval-text", "{blank}"], "blank.txt: holds no text"),
    (["--eval-text", "{latin1}"], "latin1.txt: not UTF-8 text (byte 3)"),
    (["--eval-text", "{tmp}"], ": is a folder; expected a file"),
    (["--eval-text", "/dev/zero"], "--eval-text /dev/zero: not a regular file"),
    (["--eval-text", "{fifo}"], "fifo.txt: not a regular file"),  # reading it would block for ever
    (["--eval-text", "{words}", "--eval-window", "4", "--eval-stride", "8"], "--eval-stride 8 > --eval-window 4"),
    (["--eval-text", "{words}"], "has no tokenizer (tokenizer.json, tokenizer.model"),  # checked before loading
    (["--checkpoint", "", ], "--checkpoint '': expected a checkpoint folder or .gguf file"),
    (["--model", "tiny"], "--model tiny and --checkpoint"),
    (["--layers", "100000000"], "--layers 100000000: expected an integer in [1, 1000]"),
    (["--batch", "100000"], "--batch '100000': expected integers in [1, 4096]"),
    (["--quality-tokens", "100000x2"], "--quality-tokens '100000x2': expected BxT"),
    (["--pdl"], "--pdl applies to Inductor's kernels: add --compile default"),
    (["--pdl", "--compile", "default"], "--pdl needs an NVIDIA GPU of compute capability 9.0 or newer"),
])
def test_bad_model_options_are_one_line_before_anything_runs(tmp_path, capsys, llama, args, message):
    (tmp_path / "blank.txt").write_text("  \n\n")
    (tmp_path / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (tmp_path / "words.txt").write_text("some words here\n")
    os.mkfifo(tmp_path / "fifo.txt")
    names = {"blank": tmp_path / "blank.txt", "latin1": tmp_path / "latin1.txt", "tmp": tmp_path,
             "fifo": tmp_path / "fifo.txt", "words": tmp_path / "words.txt"}
    args = [a.format(**names) for a in args]
    checkpoint = [] if "--checkpoint" in args else ["--checkpoint", str(llama)]
    base = [x for i in range(0, len(BASE), 2) if BASE[i] not in args for x in BASE[i:i + 2]]  # given once
    out = tmp_path / "run"
    code = runner.main([*checkpoint, *base, *args, "--output-dir", str(out)])
    line = one_line(capsys)
    assert code == 2 and message in line, line
    assert not out.exists()


@pytest.mark.parametrize("name,message", [
    ("", "--output-dir '': expected a folder"),
    ("{tmp}/" + "a" * 300, ": cannot create it (File name too long)"),
    ("{tmp}/loop/run", "loop/run: cannot create it (Too many levels of symbolic links)"),
    ("{tmp}/file/run", "file/run: cannot create it (Not a directory)"),
    ("{tmp}/file", "file: is a file, not a folder"),
    ("{tmp}/full", "full already holds files; choose a new folder"),
])
@pytest.mark.parametrize("bench", [["--op", "int4_gemm"], ["--model", "tiny"]])
def test_a_bad_output_dir_is_one_line_before_anything(tmp_path, capsys, monkeypatch, name, message, bench):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)  # a run that ignored "" would write under ./results
    before = sorted(os.listdir(tmp_path))
    code = runner.main([*bench, "--device", "cpu", "--output-dir", name.format(tmp=tmp_path)])
    line = one_line(capsys)
    assert code == 2 and message.format(tmp=tmp_path) in line, line
    assert sorted(os.listdir(tmp_path)) == before


# ------------------------------------------------------------ runner.py report DIR


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished smoke run: two shapes, torch and cublas (the CPU's matmul)."""
    out = tmp_path_factory.mktemp("runs") / "run"
    code = runner.main(["--op", "int4_gemm", "--backends", "cublas", "--shape", "1,128,64", "--shape", "3,256,40",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--device", "cpu", "--output-dir", str(out)])
    assert code == 0
    return out


@pytest.fixture
def run_copy(finished_run, tmp_path, capsys) -> Path:
    import shutil

    shutil.copytree(finished_run, tmp_path / "run")
    capsys.readouterr()
    return tmp_path / "run"


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("change,message", [
    (lambda d: d["metadata"].pop("settings"), "results.json: metadata: no settings object"),
    (lambda d: d["metadata"]["settings"].update(warmup_ms="25"), 'metadata: settings.warmup_ms="25": expected int'),
    (lambda d: d["metadata"]["settings"].update(baseline=None), "metadata: settings.baseline=null: expected str"),
    (lambda d: d["metadata"].update(date=3), "metadata: date=3: expected str"),
    (lambda d: d["metadata"].update(phase_s={"inputs": "x"}), "metadata: phase_s: expected numbers"),
    (lambda d: d.update(metadata=[]), "results.json: metadata: not an object"),
    (lambda d: d["metadata"]["settings"].update(repeats=0), "metadata: settings.repeats=0: expected 1 or more"),
    (lambda d: d["metadata"]["settings"].update(baseline="tinygemm"),
     'metadata: settings.baseline="tinygemm": not one of settings.backends'),
    (lambda d: d["metadata"]["settings"].update(rep_ms=0), "metadata: settings.warmup_ms=0.0, rep_ms=0: expected"),
    (lambda d: d["metadata"]["settings"].update(warmup_ms=-1), "metadata: settings.warmup_ms=-1, rep_ms=1.0: expected"),
    (lambda d: d["metadata"]["settings"].update(rep_ms=float("inf")), "settings.warmup_ms=0.0, rep_ms=inf: expected"),
    (lambda d: d["metadata"].update(ceilings={"bf16_matmul_TFLOPs": 700.0}), "expected copy_GBps and bf16_matmul"),
    (lambda d: d["metadata"].update(ceilings={"copy_GBps": 0, "bf16_matmul_TFLOPs": 700.0}), "finite and positive"),
    (lambda d: d["metadata"].update(ceilings={"copy_GBps": float("nan"), "bf16_matmul_TFLOPs": 1.0}),
     "finite and positive"),
])
def test_report_on_a_malformed_results_json_uses_metadata_json_or_says_why(run_copy, capsys, change, message):
    _edit(run_copy / "results.json", change)
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 0  # the start's metadata.json still serves
    err = capsys.readouterr().err
    assert f"note: {run_copy / 'results.json'}: " in err and message in err and "rebuilt with metadata.json" in err
    assert json.loads((run_copy / "results.json").read_text())["metadata"]["settings"]["baseline"] == "torch"
    _edit(run_copy / "results.json", change)
    _edit(run_copy / "metadata.json", lambda d: d["settings"].pop("dtype"))
    before = (run_copy / "report.md").read_text()
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 2
    line = one_line(capsys)
    assert message in line and "metadata.json: settings.dtype" not in line and "no settings.dtype" in line, line
    assert (run_copy / "report.md").read_text() == before  # nothing rewritten


def test_report_names_a_cut_last_line_and_never_loses_what_results_json_holds(run_copy, capsys):
    rows = run_copy / "rows.jsonl"
    lines = rows.read_text().splitlines()
    assert len(lines) == 4
    # As under `ulimit -f`: the last record cut mid-line; the run itself wrote results.json whole.
    rows.write_text("\n".join(lines[:3]) + "\n" + lines[3][:50])
    before = {p.name: p.read_bytes() for p in run_copy.iterdir()}
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 2
    line = one_line(capsys)
    assert line == ("error: rows.jsonl: line 4 was cut off mid-record (the process writing it was killed, or the "
                    "disk or its size limit ran out) and is left out, and results.json holds what it measured "
                    "(cublas at 3x256x40): a rebuild from rows.jsonl would lose it; results.json, report.md and "
                    "the rest are left as they are (move results.json aside to rebuild without it)")
    assert {p.name: p.read_bytes() for p in run_copy.iterdir()} == before
    # results.json too large for the limit: results.csv still holds the row.
    (run_copy / "results.json").unlink()
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 2
    assert "and results.csv holds what it measured (cublas at 3x256x40)" in one_line(capsys)
    # Killed before the tables: rebuilt from what is whole, the cut line named on stderr and in report.md.
    (run_copy / "results.csv").unlink()
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "note: rows.jsonl: line 4 was cut off mid-record" in err
    assert "**Rebuilt from rows.jsonl: rows.jsonl: line 4 was cut off" in (run_copy / "report.md").read_text()
    assert len(json.loads((run_copy / "results.json").read_text())["rows"]) == 3


@pytest.mark.parametrize("setup,message", [
    ("fifo", "rows.jsonl: not a regular file"),
    ("folder", "rows.jsonl: is a folder; expected a file"),
    ("deep", "rows.jsonl: line 1: JSON nested more than 32 deep"),
    ("latin1", "rows.jsonl: not UTF-8 text (byte"),
    ("bad type", 'line 1: samples_us="x": expected a list of positive finite numbers'),
    ("negative round", "line 1: round=-1: expected an integer >= 0"),
    ("negative p50", "line 1: p50_us=-5.0: expected a positive finite number or null"),
    ("unknown dtype", 'line 1: dtype="float8": expected bfloat16 or float16'),  # said no file nor line
    ("another op's settings", 'line 1: settings {"group_size": 128} are not split_k_gemm\'s'),
    ("another op", "a row of nvfp4_gemm (torch at 1x128x64) in a run of int4_gemm"),
    # A probe: such a row was computed as unscaled under the report's "group=128" header.
    ("other settings", 'a row with settings {"group_size": null} (torch at 1x128x64) in a run of {"group_size": 128}'),
    ("other backend", "a row of backend 'cublas\\udcff' (1x128x64), not one of the run's (torch, cublas)"),
])
def test_report_on_a_bad_rows_file_is_one_line(run_copy, capsys, setup, message):
    rows = run_copy / "rows.jsonl"
    (run_copy / "results.json").unlink()  # as after a kill: rebuilt from rows.jsonl and metadata.json
    first = rows.read_text().splitlines()[0]
    rows.unlink()
    if setup == "fifo":
        os.mkfifo(rows)
    elif setup == "folder":
        rows.mkdir()
    elif setup == "deep":
        rows.write_text("[" * 5000 + "]" * 5000 + "\n")
    elif setup == "latin1":
        rows.write_bytes(first.encode() + "\nnaïve\n".encode("latin-1"))
    else:
        d = json.loads(first)
        change = {"bad type": {"samples_us": "x"}, "negative round": {"round": -1}, "negative p50": {"p50_us": -5.0},
                  "unknown dtype": {"dtype": "float8"},
                  "another op's settings": {"op": "split_k_gemm"},
                  "another op": {"op": "nvfp4_gemm", "settings": {}, "settings_label": ""},
                  "other settings": {"settings": "unscaled", "settings_label": ""},
                  "other backend": {"backend": "cublas\udcff"}}[setup]
        rows.write_text(json.dumps({**d, **change}) + "\n")
    if setup in ("fifo", "folder"):  # no longer is_file(): refused before reading
        message = "no rows.jsonl to rebuild from"
    assert runner.main(["report", str(run_copy)]) == 2
    line = one_line(capsys)
    assert message in line, line


@pytest.mark.parametrize("op", ["missing", None])
def test_report_takes_the_operator_from_the_rows_when_metadata_has_none(run_copy, capsys, op):
    # settings.op is optional in the metadata (the rows name it): report.md's title read it, a KeyError.
    (run_copy / "results.json").unlink()
    _edit(run_copy / "metadata.json", lambda d: d["settings"].pop("op") if op == "missing" else
          d["settings"].update(op=op))
    assert runner.main(["report", str(run_copy), "--no-plots"]) == 0
    assert (run_copy / "report.md").read_text().startswith("# int4_gemm ")
    assert json.loads((run_copy / "results.json").read_text())["metadata"]["settings"]["op"] == "int4_gemm"


def test_a_baseline_that_cannot_run_here_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--baseline", "tinygemm", "--backends", "torch", "--shape", "1,128,64",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--device", "cpu", "--output-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --baseline tinygemm cannot run here (needs a CUDA device), so no row would "
                                 "get a speedup; choose one that runs here, e.g. --baseline torch"], err
    assert not out.exists()


def test_a_baseline_that_fails_at_every_shape_says_why_there_are_no_speedups(tmp_path, capsys, monkeypatch):
    # Known only once it ran: the run goes on, and the report says why no row has a speedup.
    from qgemm_bench.backends.registry import Backend
    from tests.support import extra_backends

    def broken(case, inputs):
        raise RuntimeError("no kernel for this shape")

    extra_backends(monkeypatch, "int4_gemm", [Backend("int4_gemm", "broken", "fails in prepare", broken)])
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--baseline", "broken", "--backends", "torch", "--shape", "1,128,64",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--device", "cpu", "--output-dir", str(out)])
    assert code == 0 and "no speedups: the baseline broken did not run correctly at any shape (error: " \
        in capsys.readouterr().out
    assert all(r["speedup"] is None for r in json.loads((out / "results.json").read_text())["rows"])


def test_a_baseline_the_interpreter_ran_gives_no_speedups(tmp_path, capsys, monkeypatch):
    """--baseline triton on a CPU: its time is the Triton interpreter's, and
    cublas showed 155x over it. No row gets a speedup; the note says why."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "run"
    code = runner.main(["--op", "int4_gemm", "--baseline", "triton", "--backends", "cublas", "--shape", "16,256,128",
                        "--rep", "1", "--warmup", "0", "--no-plots", "--device", "cpu", "--dtype", "float16",
                        "--output-dir", str(out)])
    assert code == 0 and "no speedups: the baseline triton ran in the Triton interpreter" in capsys.readouterr().out
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {r["backend"] for r in rows if r["status"] == "ok"} >= {"triton", "cublas"}
    assert all(r["speedup"] is None for r in rows)


# ------------------------------------------------------------ flags given twice, the environment


@pytest.mark.parametrize("args,message", [
    (["--op", "int4_gemm", "--op", "split_k_gemm"], "--op is given twice ('int4_gemm', then 'split_k_gemm')"),
    (["--op=int4_gemm", "--out", "a", "--output-dir=b"], "--output-dir is given twice ('a', then 'b')"),
    (["compare", "a", "b", "--format", "md", "--format", "json"], "--format is given twice ('md', then 'json')"),
    (["--model", "tiny", "--batch", "1", "--batch", "4"], "--batch is given twice ('1', then '4')"),
])
def test_an_option_given_twice_is_refused(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert runner.main(args) == 2
    assert message in one_line(capsys)
    assert os.listdir(tmp_path) == []
    # --shape and --backends' lists repeat on purpose: --shape is repeatable.
    assert runner.main(["--op", "int4_gemm", "--shape", "1,128,64", "--shape", "2,128,64", "--list-ops"]) == 0


@pytest.mark.parametrize("env,message", [
    ({"WORLD_SIZE": "abc"}, "environment: WORLD_SIZE='abc': expected a non-negative integer"),
    ({"WORLD_SIZE": "2", "RANK": "x"}, "environment: RANK='x': expected a non-negative integer"),
    ({"WORLD_SIZE": "2"}, "environment: WORLD_SIZE=2 without RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT"),
    ({"WORLD_SIZE": "2", "RANK": "5", "LOCAL_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "environment: RANK=5 is not below WORLD_SIZE=2"),
])
def test_a_bad_torchrun_environment_is_one_line(tmp_path, capsys, monkeypatch, env, message):
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = runner.main(["--op", "int4_gemm", "--output-dir", str(tmp_path / "run")])
    assert code == 2 and message in one_line(capsys)  # printed: no rank 0 would say it otherwise
    assert not (tmp_path / "run").exists()


def test_compare_never_renames_over_a_device_or_a_pipe(tmp_path, capsys):
    """As root, --output /dev/null replaced the device with a regular file (write_atomic's rename).
    A FIFO stands in for the device here: a regression must not break the machine's /dev/null."""
    from tests.test_compare import row, write

    base = write(tmp_path / "base", [row()])
    os.mkfifo(tmp_path / "pipe")
    os.mkfifo(tmp_path / "pipe.png")
    for option, target in (("--output", tmp_path / "pipe"), ("--plot", tmp_path / "pipe.png")):
        code = runner.main(["compare", base, base, option, str(target)])
        line = one_line(capsys)
        assert code == 2 and f"{option} {target}: not a regular file (a device, pipe or socket)" in line, line
    assert (tmp_path / "pipe").is_fifo() and (tmp_path / "pipe.png").is_fifo()
    from qgemm_bench.harness.outputs import WriteError, write_atomic

    with pytest.raises(WriteError, match="pipe: not a regular file"):
        write_atomic(tmp_path / "pipe", "text")
    assert (tmp_path / "pipe").is_fifo()
