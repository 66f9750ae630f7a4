"""Benchmark commands (``scaleahead bench ...``): EVALUATION.md implemented exactly.

Part of the composition root: it wires forecasters, the planner and the simulated actuator.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO


def open_text_out(path: Path) -> IO[str]:
    """``path`` opened to write text (a ``--decisions`` file): gzip-compressed when it ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8", newline="")
    return path.open("w", encoding="utf-8", newline="")
