"""Which GGUF `--model` designates without `--base-url`: the shipped ones by name, a researcher's file as
`local:PATH`, each checked before a run (llm/embedded_models.py, llm/gguf.py)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from apibank_bench.llm import is_embedded_model
from apibank_bench.llm import embedded_models as em
from apibank_bench.llm.gguf import NotGGUF, file_sha256, read_metadata


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, metadata: dict, tokens: int = 5) -> Path:
    """A GGUF header (version 3, no tensors) with string and uint32 values and a token array."""
    items = []
    for key, value in metadata.items():
        if isinstance(value, str):
            items.append(_string(key) + struct.pack("<I", 8) + _string(value))
        else:
            items.append(_string(key) + struct.pack("<I", 4) + struct.pack("<I", value))
    array = _string("tokenizer.ggml.tokens") + struct.pack("<I", 9) + struct.pack("<IQ", 8, tokens) + b"".join(
        _string(f"tok{i}") for i in range(tokens))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(items) + 1) + b"".join(items) + array)
    return path


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
    with pytest.raises(ValueError, match="no such file"):
        em.check_local(em.choose(f"local:{tmp_path / 'none.gguf'}"))
    bare = write_gguf(tmp_path / "bare.gguf", {"general.name": "Base"})
    with pytest.raises(ValueError, match="--chat-format"):
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
