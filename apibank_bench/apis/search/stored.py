"""Catalog embeddings kept on disk between runs, and keyword embeddings kept for the process.

A catalog's texts (an API set's descriptions, or the recorded ToolSearcher outputs) are fixed,
and the numpy engine computes the same float32 vectors for them on every run: about 0.6 s of
CPU for the eval set's two catalogs, taken from the run's requests (they share the GIL). So the
vectors are written once, as `.npy`, under the cache folder, in a file named by what decides
them: the bytes of every file the engine reads from the model folder, of the engine's own
source (minilm.py: a change to its arithmetic is a new engine), numpy's version and the texts.
A file that is missing, unreadable or of the wrong shape is computed again; nothing is stored
when the folder cannot be written.

Keywords differ per answer, so they are not stored; within one process the same keywords
(a team's agents often search alike) are embedded once.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Sequence

from apibank_bench.core.files import write_atomic

#: The model folder's files the numpy engine reads (minilm.MiniLM).
ENGINE_FILES = ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json", "config.json",
                "model.safetensors", "tokenizer.json")
KEYWORDS_KEPT = 4096  #: distinct keyword texts remembered per process


def model_fingerprint(folder: Path) -> str:
    """What the engine's vectors depend on besides the texts."""
    import numpy as np

    from apibank_bench.apis.search import minilm

    digest = hashlib.sha256(f"numpy {np.__version__}\n".encode())
    digest.update(hashlib.sha256(Path(minilm.__file__).read_bytes()).digest())
    for name in ENGINE_FILES:
        digest.update(f"{name}\n".encode())
        digest.update(hashlib.sha256((folder / name).read_bytes()).digest())
    return digest.hexdigest()


def stored_vectors(directory: Path, fingerprint: str, texts: Sequence[str],
                   compute: Callable[[str], Any]) -> list[Any]:
    """`[compute(text) for text in texts]` (float32 vectors), read from `directory` when an earlier run
    stored it."""
    import numpy as np

    key = hashlib.sha256(fingerprint.encode())
    for text in texts:
        key.update(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    path = directory / f"catalog-{key.hexdigest()[:32]}.npy"
    try:
        rows = np.load(path, allow_pickle=False)
        if rows.dtype == np.float32 and rows.ndim == 2 and len(rows) == len(texts):
            return list(rows)
    except (OSError, ValueError, EOFError):  # missing, not .npy, or empty
        pass
    vectors = [compute(text) for text in texts]
    if vectors:
        _write(path, np.stack(vectors))
    return vectors


def _write(path: Path, rows) -> None:
    """Write atomically (a concurrent run reads the whole file or none); a folder we cannot write is fine."""
    import numpy as np

    data = io.BytesIO()
    np.save(data, rows, allow_pickle=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data.getvalue())
    except OSError:
        pass


class KeywordMemo:
    """The last `KEYWORDS_KEPT` texts' vectors (each caller gets its own copy)."""

    def __init__(self, size: int = KEYWORDS_KEPT) -> None:
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, text: str, compute: Callable[[str], Any]) -> Any:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return vector.copy()
        vector = compute(text)
        with self._lock:
            self._vectors[text] = vector.copy()
            if len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector
