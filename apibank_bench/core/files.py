"""Writing a file so that a reader sees the old one or the new one, never a part."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, sync: bool = True) -> None:
    """Replace `path` with `data` (text is written as UTF-8).

    The temporary file has a name of its own (not just this process's ID, which another node
    on a shared file system may also have) and is on disk before the rename; with `sync` False it
    is left to the OS to write (a reader still sees the old file or the new one, but the machine's
    crash may leave it empty: for a file that is cheap to lose, where an fsync each would cost).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # made with the usual permissions
    try:
        with open(tmp, "xb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
