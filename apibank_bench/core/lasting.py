"""The garbage collector's one tuning: objects that live as long as the process (the model layer,
LangGraph, a built solver, the APIs) are kept out of its passes.

A run imports and builds a few hundred thousand such objects and no garbage among them; the
collector's passes over them cost about 0.1 s before the first request, and every later pass (the
automatic ones during a run, pytest's at its end) would scan them again. Frozen, they are skipped.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


def freeze_lasting() -> None:
    """Everything made so far lives as long as the process: later collections scan only what comes after."""
    gc.freeze()


@contextmanager
def building_lasting() -> Iterator[None]:
    """What is built inside lives as long as the process: no collection runs meanwhile, and it is frozen after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze_lasting()
        if collecting:
            gc.enable()
