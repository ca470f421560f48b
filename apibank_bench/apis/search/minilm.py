"""The MiniLM sentence embedding as a numpy forward pass, without torch or sentence-transformers.

Importing torch and sentence-transformers takes about 8 s on 2 cores; this engine imports, loads
and checks in about 1 s. Given a sentence-transformers folder holding exactly a BERT Transformer
module and mean pooling (what paraphrase-MiniLM-L3-v2 is), it computes what
`SentenceTransformer(folder).encode(text)` computes: WordPiece ids from the folder's `tokenizer.json`
(the same Rust tokenizer transformers runs), truncated to `max_seq_length`; BERT's embeddings,
post-LayerNorm encoder layers with erf GELU, all in float32 as torch on CPU; then the mean
of the token vectors. One text at a time, so there is no padding to mask.

A folder or an environment this engine does not cover raises `Unsupported`; the caller then uses
sentence-transformers itself.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"


class Unsupported(Exception):
    """This folder (or a missing package) is outside what the numpy engine computes faithfully."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise Unsupported(f"cannot read {path.name}: {exc}") from exc


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise Unsupported(what)


class MiniLM:
    """A BERT sentence encoder with mean pooling, read from a sentence-transformers folder."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder)
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise Unsupported(f"the numpy engine needs safetensors and tokenizers ({exc})") from exc
        self.folder = folder

        modules = _read_json(folder / "modules.json")
        _require([(m.get("type"), m.get("path")) for m in modules] == [(TRANSFORMER, ""), (POOLING, "1_Pooling")],
                 "modules other than one Transformer and one Pooling")
        pooling = _read_json(folder / "1_Pooling" / "config.json")
        modes = {key: value for key, value in pooling.items() if key.startswith("pooling_mode_")}
        _require(modes.get("pooling_mode_mean_tokens") is True and not any(
            value for key, value in modes.items() if key != "pooling_mode_mean_tokens"), "pooling other than the mean")
        _require(pooling.get("include_prompt", True) is True, "pooling that leaves out prompt tokens")
        module = _read_json(folder / "sentence_bert_config.json")
        _require(not module.get("do_lower_case") and isinstance(module.get("max_seq_length"), int),
                 "a Transformer module setting other than max_seq_length")
        config = _read_json(folder / "config.json")
        _require(config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
                 and config.get("position_embedding_type", "absolute") == "absolute", "not a BERT model with GELU")
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config["layer_norm_eps"])
        # sentence-transformers caps max_seq_length at the model's position embeddings.
        self.max_length = min(module["max_seq_length"], int(config["max_position_embeddings"]))

        if not (folder / "model.safetensors").is_file():
            raise Unsupported("no model.safetensors")
        weights = {name.removeprefix("bert."): array for name, array in load_file(str(folder / "model.safetensors")).items()}
        try:
            self._take_weights(weights, int(config["num_hidden_layers"]))
        except KeyError as exc:
            raise Unsupported(f"missing weight {exc}") from exc

        if not (folder / "tokenizer.json").is_file():
            raise Unsupported("no tokenizer.json")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        # Counts the [CLS] and [SEP] the post-processor adds, as transformers' truncation does.
        self.tokenizer.enable_truncation(self.max_length)
        self._one_blas_thread = _one_blas_thread()

    def _take_weights(self, weights: dict[str, np.ndarray], layers: int) -> None:
        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def linear(name: str) -> tuple[np.ndarray, np.ndarray]:  # stored (out, in), as torch's Linear
            return np.ascontiguousarray(get(f"{name}.weight").T), get(f"{name}.bias")

        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")
        self.embedding_norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(layers):
            prefix = f"encoder.layer.{i}."
            self.layers.append({
                "query": linear(prefix + "attention.self.query"),
                "key": linear(prefix + "attention.self.key"),
                "value": linear(prefix + "attention.self.value"),
                "attention_out": linear(prefix + "attention.output.dense"),
                "attention_norm": (get(prefix + "attention.output.LayerNorm.weight"),
                                   get(prefix + "attention.output.LayerNorm.bias")),
                "intermediate": linear(prefix + "intermediate.dense"),
                "out": linear(prefix + "output.dense"),
                "out_norm": (get(prefix + "output.LayerNorm.weight"), get(prefix + "output.LayerNorm.bias")),
            })
        hidden = self.word.shape[1]
        _require(hidden % self.heads == 0, "hidden size not divisible by the heads")
        self.dimension = hidden

    # -- the forward pass ----------------------------------------------------------------------

    def token_ids(self, text: str) -> list[int]:
        """The ids sentence-transformers feeds the model for `text` (raises on text the tokenizer rejects)."""
        return self.tokenizer.encode(text).ids

    def _layer_norm(self, x: np.ndarray, norm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        return centered / np.sqrt(variance + self.eps) * norm[0] + norm[1]

    def _gelu(self, x: np.ndarray) -> np.ndarray:
        return x * np.float32(0.5) * (np.float32(1.0) + _erf(x * np.float32(math.sqrt(0.5))))

    def _forward(self, ids: Sequence[int]) -> np.ndarray:
        """The mean-pooled embedding (float32, shape (hidden,)) of one sequence of token ids."""
        n = len(ids)
        x = self.word[np.asarray(ids, dtype=np.int64)] + self.position[:n] + self.token_type[0]
        x = self._layer_norm(x, self.embedding_norm)
        head = self.dimension // self.heads
        scale = np.float32(1.0 / math.sqrt(head))
        for layer in self.layers:
            def project(name, inputs, layer=layer):
                weight, bias = layer[name]
                return inputs @ weight + bias

            # (heads, n, head) for the query, key and value
            q, k, v = (project(name, x).reshape(n, self.heads, head).transpose(1, 0, 2) for name in ("query", "key", "value"))
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            attention = scores / scores.sum(axis=-1, keepdims=True)
            context = (attention @ v).transpose(1, 0, 2).reshape(n, self.dimension)
            x = self._layer_norm(project("attention_out", context) + x, layer["attention_norm"])
            x = self._layer_norm(project("out", self._gelu(project("intermediate", x))) + x, layer["out_norm"])
        return x.mean(axis=0)

    def encode(self, sentences: str | Sequence[str]) -> np.ndarray:
        """Like `SentenceTransformer.encode` for a str (shape (hidden,)) or a list of str (shape (len, hidden))."""
        if isinstance(sentences, str):
            return self.encode_ids(self.token_ids(sentences))
        if not all(isinstance(sentence, str) for sentence in sentences):
            raise TypeError("the numpy engine embeds text only")
        if not sentences:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._one_blas_thread():
            return np.stack([self._forward(self.token_ids(sentence)) for sentence in sentences])

    def encode_ids(self, ids: Sequence[int]) -> np.ndarray:
        """The embedding of one text given its `token_ids`."""
        with self._one_blas_thread():
            return self._forward(ids)


#: Abramowitz & Stegun 7.1.26: erf(x) = 1 - t (a1 + a2 t + ... + a5 t^4) exp(-x^2), t = 1 / (1 + p x).
_P = np.float32(0.3275911)
_A = tuple(map(np.float32, (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)))  # a5 .. a1


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float32 as torch's CPU GELU kernel computes it: its vectorized erf is this approximation
    (error below 1.5e-7), not the exact erf of `torch.erf`, so an exact erf (scipy's) matched torch's
    GELU on 40% of float32 inputs and this matches it on 76% (the rest by an ulp: torch fuses the
    multiply-adds). It also spares importing scipy.special, 0.4 s of CPU."""
    magnitude = np.abs(x)
    t = np.float32(1.0) / (_P * magnitude + np.float32(1.0))
    poly = _A[0]
    for coefficient in _A[1:]:
        poly = poly * t + coefficient
    return np.copysign(np.float32(1.0) - poly * t * np.exp(-(magnitude * magnitude)), x)


def _one_blas_thread():
    """A context that runs numpy's BLAS on one thread. These products are small: handing them to a
    second BLAS thread costs more than it saves, and on a busy machine far more (a 16 x 384 x 1536
    product took 37 ms on two threads against 0.4 ms on one)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext
    controller = ThreadpoolController()
    return lambda: controller.limit(limits=1, user_api="blas")
