"""A GGUF file's header: its key/value metadata, read without loading the model (the GGUF format of
llama.cpp: magic `GGUF`, version, tensor and key counts, then typed key/value pairs).

Used to check a researcher's file before a run (is it a GGUF, has it a chat template, does it fit in
memory) and to name it. Arrays are read past (the vocabulary is one): only their length is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

MAGIC = b"GGUF"
#: value type -> struct format of one scalar (8: string, 9: array are read apart)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class NotGGUF(ValueError):
    """The file is not a GGUF (or its header is cut short)."""


class _Reader:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def take(self, size: int) -> bytes:
        data = self.stream.read(size)
        if len(data) != size:
            raise NotGGUF("the header ends early")
        return data

    def scalar(self, kind: int) -> Any:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        size = self.scalar(10)
        if size > 1 << 26:  # a chat template is a few KB; a garbage length is not a GGUF
            raise NotGGUF("a string longer than 64 MiB in the header")
        return self.take(size).decode("utf-8", "replace")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.scalar(4), self.scalar(10)
            if item == _STRING:
                for _ in range(count):
                    self.stream.seek(self.scalar(10), os.SEEK_CUR)
            elif item in _SCALARS:
                self.stream.seek(count * struct.calcsize(_SCALARS[item]), os.SEEK_CUR)
            else:
                raise NotGGUF(f"an array of unknown type {item}")
            return {"array_length": count}
        if kind not in _SCALARS:
            raise NotGGUF(f"a value of unknown type {kind}")
        return self.scalar(kind)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's metadata keys (`general.name`, `tokenizer.chat_template`, ...); arrays as their length.
    NotGGUF when the file is not one; OSError when it cannot be read."""
    with open(path, "rb") as stream:
        reader = _Reader(stream)
        if stream.read(4) != MAGIC:
            raise NotGGUF("it does not start with the GGUF magic bytes")
        version = reader.scalar(4)
        if version not in (2, 3):
            raise NotGGUF(f"GGUF version {version} (llama.cpp reads 2 and 3)")
        reader.scalar(10)  # tensors
        keys = reader.scalar(10)
        if keys > 1 << 16:
            raise NotGGUF(f"{keys} metadata keys")
        metadata = {reader.string(): reader.value(reader.scalar(4)) for _ in range(keys)}
        if stream.tell() > os.fstat(stream.fileno()).st_size:  # an array read past by seeking beyond the end
            raise NotGGUF("the header ends early")
        return metadata


def file_sha256(path: str | os.PathLike[str], memo: Path | None = None) -> str:
    """The file's sha256, remembered in `memo` (a JSON file) by path, size and modification time: a 1 GB
    model is hashed once, not every run."""
    path = Path(path).resolve()
    stat = path.stat()
    stamp = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    known: dict[str, str] = {}
    if memo is not None:
        try:
            known = json.loads(memo.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        if isinstance(known, dict) and isinstance(known.get(stamp), str):
            return known[stamp]
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    if memo is not None:
        try:
            from apibank_bench.core.files import write_atomic

            memo.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(memo, json.dumps({**(known if isinstance(known, dict) else {}), stamp: sha}))
        except OSError:
            pass  # best-effort: hashed again next time
    return sha
