"""Catalog embeddings stored between runs, and keywords embedded once per process: the same float32
vectors as the engine computes, bit for bit, and computed again whenever a stored file cannot be used."""

from __future__ import annotations

import numpy as np
import pytest

from apibank_bench.apis.search import model as embedding
from apibank_bench.apis.search import stored
from apibank_bench.apis.search.catalog import spec_catalog
from apibank_bench.data import specs


@pytest.fixture(scope="module")
def engine():
    model = embedding.get_model()
    if not embedding._is_engine(model):
        pytest.fail("the numpy engine should load on this machine")
    return model


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh cache root, so this test's files are its own."""
    monkeypatch.setattr(embedding, "_cache_root", lambda: tmp_path)
    return tmp_path / "embeddings"


def fresh(engine, texts):
    return [engine.encode_ids(engine.token_ids(text)) for text in texts]


def test_stored_vectors_are_the_computed_ones_bit_for_bit(engine, store):
    texts = list(spec_catalog(specs.LEVEL3).texts)
    first = embedding.encode_catalog(texts)
    [written] = store.glob("catalog-*.npy")
    computed = [0]
    original = stored.stored_vectors

    def counting(directory, fingerprint, texts, compute):
        return original(directory, fingerprint, texts, lambda text: computed.__setitem__(0, computed[0] + 1)
                        or compute(text))

    read_back = embedding.encode_catalog(texts)  # read back
    want = fresh(engine, texts)
    for got in (first, read_back):
        assert len(got) == len(texts)
        assert all(a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b) for a, b in zip(got, want))
    assert list(store.glob("catalog-*.npy")) == [written]
    # Read back, nothing is computed.
    vectors = counting(store, embedding._FINGERPRINT, texts, lambda text: pytest.fail("stored: " + text))
    assert computed == [0] and all(np.array_equal(a, b) for a, b in zip(vectors, want))


def test_other_texts_or_another_model_get_another_file(engine, store):
    embedding.encode_catalog(["add alarm", "book hotel"])
    embedding.encode_catalog(["add alarm", "book a hotel"])
    stored.stored_vectors(store, "another model", ["add alarm", "book hotel"], lambda text: np.zeros(3, np.float32))
    assert len(list(store.glob("catalog-*.npy"))) == 3


@pytest.mark.parametrize("damage", [b"", b"not numpy at all", "wrong shape"])
def test_a_damaged_file_is_computed_again_and_replaced(engine, store, damage):
    texts = ["add alarm", "delete alarm", "book hotel"]
    want = fresh(engine, texts)
    embedding.encode_catalog(texts)
    [path] = store.glob("catalog-*.npy")
    if damage == "wrong shape":
        np.save(path, np.zeros((2, 384), np.float32))
    else:
        path.write_bytes(damage)
    got = embedding.encode_catalog(texts)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(np.load(path), np.stack(want))  # written again, whole


def test_an_unwritable_folder_still_gives_the_vectors(engine, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setattr(embedding, "_cache_root", lambda: blocker)
    texts = ["add alarm", "book hotel"]
    assert all(np.array_equal(a, b) for a, b in zip(embedding.encode_catalog(texts), fresh(engine, texts)))


def test_the_fingerprint_follows_every_file_the_engine_reads(engine, tmp_path):
    folder = tmp_path / "model"
    for name in stored.ENGINE_FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes((engine.folder / name).read_bytes())
    assert stored.model_fingerprint(folder) == stored.model_fingerprint(engine.folder)
    prints = set()
    for name in stored.ENGINE_FILES:
        original = (folder / name).read_bytes()
        (folder / name).write_bytes(original + b" ")
        prints.add(stored.model_fingerprint(folder))
        (folder / name).write_bytes(original)
    assert len(prints) == len(stored.ENGINE_FILES) and stored.model_fingerprint(engine.folder) not in prints


def test_a_keyword_is_embedded_once_and_each_caller_gets_its_own_copy(engine, monkeypatch):
    calls = []
    real = embedding._engine_vector
    monkeypatch.setattr(embedding, "_engine_vector", lambda model, text: calls.append(text) or real(model, text))
    text = "a keyword searched by this test only"
    first = embedding.encode(text)
    first[:] = 0  # a caller that writes into its vector harms no later caller
    second = embedding.encode(text)
    assert calls == [text]
    assert np.array_equal(second, fresh(engine, [text])[0]) and not np.array_equal(first, second)


def test_the_memo_keeps_the_newest_texts():
    memo = stored.KeywordMemo(size=2)
    computed = []

    def compute(text):
        computed.append(text)
        return np.array([len(text)], np.float32)

    for text in ["a", "bb", "a", "ccc", "bb", "a"]:
        memo.get(text, compute)
    # "a" stays (used again before "ccc" came); "bb" is dropped by "ccc" and computed again.
    assert computed == ["a", "bb", "ccc", "bb", "a"]
