"""`functools.cache` for data loaded once per process, safe when many instance threads ask first at once
(plain `cache` would let each of them load its own copy: 32 threads, 32 copies of the task index)."""

from __future__ import annotations

import threading
from functools import cache, wraps
from typing import Callable, TypeVar, cast

F = TypeVar("F", bound=Callable)


def load_once(function: F) -> F:
    cached = cache(function)
    lock = threading.RLock()

    @wraps(function)
    def wrapper(*args):
        with lock:
            return cached(*args)

    return cast(F, wrapper)
