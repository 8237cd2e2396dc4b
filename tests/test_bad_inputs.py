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
    out = tmp_path / "run"
    code = runner.main([*checkpoint, *BASE, *args, "--output-dir", str(out)])
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
