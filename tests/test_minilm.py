"""The numpy engine of ToolSearcher's embedding model against sentence-transformers itself.

The engine (apibank_bench/apis/search/minilm.py) must give what `SentenceTransformer.encode` gives
on the same folder, and every search must pick what upstream's search (sentence-transformers +
`util.cos_sim(...).item()`) picks: on every catalog text, every recorded ToolSearcher keyword and a
few hundred odd strings. Input that is not a str still goes to sentence-transformers: its results
and errors must be exactly today's. The comparisons need torch and sentence-transformers (CI's
venv has them); tests/test_no_torch.py checks what works without them.
"""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest

from apibank_bench.apis.search import model as embedding
from apibank_bench.apis.search.catalog import Catalog, spec_catalog
from apibank_bench.apis.search.minilm import MiniLM, Unsupported
from apibank_bench.data import specs
from apibank_bench.data.tasks import load_level
from apibank_bench.scoring.toolsearcher_scorers import frozen_search

#: The embeddings may differ by float32 rounding (another order of sums), nothing more.
ATOL = 1e-5


@pytest.fixture(scope="module")
def engine():
    model = embedding.get_model()
    assert isinstance(model, MiniLM), "the numpy engine should load here"
    return model


@pytest.fixture(scope="module")
def sentence_transformer(engine):
    torch = pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    model = embedding.sentence_transformer()
    assert not isinstance(model, MiniLM)
    # Its small products are slower on two threads (0.4 s a sentence on this busy machine, 36 ms on one).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield model
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def catalogs(apibank_root) -> dict[str, Catalog]:
    return {
        "spec apis": spec_catalog(specs.LEVEL12),
        "spec lv3_apis": spec_catalog(specs.LEVEL3),
        "frozen level 2": frozen_search(apibank_root, "2").catalog,
        "frozen level 3": frozen_search(apibank_root, "3").catalog,
    }


def recorded_keywords(root) -> list:
    """The keywords of every ToolSearcher call in the data (each call is a task's gold)."""
    return [task.gold.params.get("keywords") for level in ("1", "2", "3") for task in load_level(level, root)
            if task.gold.api_name == "ToolSearcher"]


def odd_strings(count: int = 300) -> list[str]:
    """Varied text, seeded: empty and blank, words of the vocabulary, accents, scripts, emoji,
    punctuation, control characters, and texts past the 128-token limit."""
    rng = random.Random(19)
    words = ["alarm", "book", "hotel", "weather", "token", "meeting", "cancel", "delete", "schedule", "stock",
             "Héllo", "naïve", "straße", "日本語", "Ελληνικά", "русский", "عربى", "हिन्दी", "🎉", "🤖", "ʕ•ᴥ•ʔ",
             "don't", "O'Neil's", "e-mail", "C++", "$100", "3.14", "2023-03-25", "08:30:00", "#", "@user",
             "\u200b", "\ufeff", "\x00", "\t", "\n", "\u00a0", "ＡＢＣ", "ﬁ", "x" * 120, "unbelievably"]
    fixed = ["", " ", "\n\t ", "a", "A", "?", "!!!???...", "[CLS]", "[SEP] [PAD] [MASK] [UNK]", "ToolSearcher",
             "a " * 300, "x" * 1000, "word " * 127, "word " * 126, "GetUserToken(username='a', password='b')",
             "{'keywords': 'add alarm'}", "add alarm", "ADD ALARM", "  add   alarm  "]
    texts = list(fixed)
    while len(texts) < count:
        length = rng.choice([1, 2, 3, 5, 8, 20, 60, 140])
        sep = rng.choice([" ", "", ", ", "-", "  "])
        texts.append(sep.join(rng.choice(words) for _ in range(length)))
    return texts


def todays_best(st_embeddings: list, keyword_embedding) -> int | None:
    """Upstream's and yesterday's `Catalog.best` arithmetic: torch's cosine, `.item()`, strict `>` from 0."""
    from sentence_transformers import util

    best, best_score = None, 0
    for i, desc in enumerate(st_embeddings):
        score = util.cos_sim(keyword_embedding, desc).item()
        if score > best_score:
            best, best_score = i, score
    return best


def outcome(function, *args):
    try:
        return "ok", function(*args)
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return type(exc).__name__, str(exc)


# -- the engine alone -----------------------------------------------------------------------

def test_engine_reproduces_the_recorded_onnx_embeddings(engine):
    assert embedding.check_model(engine) <= embedding.CHECK_ATOL
    one = engine.encode("add alarm")
    assert one.dtype == np.float32 and one.shape == (384,)
    assert np.array_equal(engine.encode(["add alarm", "book hotel"])[0], one)
    assert engine.encode([]).shape == (0, 384)
    assert len(engine.token_ids("word " * 500)) == 128  # truncated, [CLS] and [SEP] included
    with pytest.raises(TypeError):
        engine.encode(["add alarm", 5])


def test_engine_refuses_a_folder_it_does_not_cover(tmp_path, engine):
    def copy(change):
        folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
        shutil.copytree(engine.folder, folder)
        change(folder)
        return folder

    def add_normalize(folder):
        modules = json.loads((folder / "modules.json").read_text())
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "modules.json").write_text(json.dumps(modules))

    def cls_pooling(folder):
        config = json.loads((folder / "1_Pooling" / "config.json").read_text())
        config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))

    def tanh_gelu(folder):
        config = json.loads((folder / "config.json").read_text())
        config["hidden_act"] = "gelu_new"
        (folder / "config.json").write_text(json.dumps(config))

    for change, reason in [(add_normalize, "Transformer and one Pooling"), (cls_pooling, "pooling other than the mean"),
                           (tanh_gelu, "GELU"), (lambda f: (f / "model.safetensors").unlink(), "model.safetensors"),
                           (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json")]:
        with pytest.raises(Unsupported, match=reason):
            MiniLM(copy(change))


def test_an_uncovered_folder_falls_back_to_sentence_transformers(tmp_path, engine, monkeypatch):
    class Fallback:
        pass

    folder = tmp_path / "m"
    shutil.copytree(engine.folder, folder)
    (folder / "model.safetensors").unlink()
    monkeypatch.setattr(embedding, "_model_folder", lambda: (folder, True))
    monkeypatch.setattr(embedding, "_load_sentence_transformer", Fallback)
    assert isinstance(embedding._load(), Fallback)


# -- against sentence-transformers ---------------------------------------------------------------

def test_embeddings_and_best_matches_equal_sentence_transformers(apibank_root, engine, sentence_transformer, catalogs,
                                                                 monkeypatch):
    keywords = recorded_keywords(apibank_root)
    assert len(keywords) == 159 and all(isinstance(k, str) for k in keywords)
    texts = list(dict.fromkeys(
        [text for catalog in catalogs.values() for text in catalog.texts] + keywords + odd_strings()))
    assert len(texts) > 400

    ours = {text: embedding.encode(text) for text in texts}
    theirs = {text: sentence_transformer.encode(text) for text in texts}
    worst = max(float(np.max(np.abs(ours[t] - theirs[t]))) for t in texts)
    assert worst <= ATOL, worst
    assert all(ours[t].dtype == theirs[t].dtype and ours[t].shape == theirs[t].shape for t in texts)

    # Each search on the engine's embeddings as computed above (not computed again).
    monkeypatch.setattr(embedding, "encode", ours.__getitem__)
    for name, catalog in catalogs.items():
        st_catalog = [theirs[text] for text in catalog.texts]
        differ = [text for text in texts if catalog.best(text) != todays_best(st_catalog, theirs[text])]
        assert not differ, (name, differ[:5])


def test_a_token_the_tokenizer_rejects_fails_as_in_sentence_transformers(engine, sentence_transformer):
    for text in ["\ud800", "add \udcff alarm"]:
        assert outcome(embedding.encode, text) == outcome(sentence_transformer.encode, text)
        assert outcome(embedding.encode, text)[0] == "TypeError"


NOT_TEXT = [[], ["add alarm"], ["add alarm", "delete alarm"], ("book hotel",), [["add alarm"]], 5, 3.5, True, None,
            {"a": 1}, {"text": "book hotel"}, b"add alarm", ["\ud800"], np.str_("add alarm"), "\ud800", "add alarm",
            "", "weather forecast for coordinates", "please set an alarm for 7 am"]


@pytest.mark.parametrize("api_set", [specs.LEVEL12, specs.LEVEL3])
def test_envelopes_equal_todays_for_text_and_other_input(api_set, engine, sentence_transformer):
    from apibank_bench.apis import api_classes

    tool = api_classes(api_set)["ToolSearcher"]()
    catalog = tool.catalog
    st_catalog = [sentence_transformer.encode(text) for text in catalog.texts]

    def today(keywords):
        return todays_best(st_catalog, sentence_transformer.encode(keywords))

    for keywords in NOT_TEXT:
        assert outcome(catalog.best, keywords) == outcome(today, keywords), keywords
        ours = outcome(tool.call, keywords)
        catalog.best = today  # this instance only
        try:
            theirs = outcome(tool.call, keywords)
        finally:
            del catalog.best
        assert ours == theirs, keywords
    assert outcome(tool.call, ["add alarm", "delete alarm"])[1]["exception"]  # the sample does reach errors
