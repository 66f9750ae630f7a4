"""Sharding workloads across controller replicas: which shard owns a workload.

One process handles a few thousand workloads per 10 s cycle (docs/adr/0008). Beyond that, run N
shards (``scaleahead run --shard i/N``), each with its own leader-elected pair of replicas: a
workload belongs to shard ``stable_hash(key) mod N``. The hash is SHA-1 of ``Kind/namespace/name``
so every process, language and restart agrees, and adding a workload never moves the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from scaleahead.errors import UserError
from scaleahead.policy import Policy


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` -> (i, N) with 0 <= i < N."""
    try:
        index_s, count_s = text.split("/", 1)
        index, count = int(index_s), int(count_s)
    except ValueError as exc:
        raise UserError(
            f"--shard {text!r} is not INDEX/COUNT.", "E.g. --shard 0/3 for the first of three shards."
        ) from exc
    if count < 1 or not 0 <= index < count:
        raise UserError(f"--shard {text!r}: INDEX must be in 0..COUNT-1.", "E.g. --shard 2/3.")
    return index, count


def shard_of(key: str, count: int) -> int:
    return int.from_bytes(hashlib.sha1(key.encode(), usedforsecurity=False).digest()[:8], "big") % count


def owned(policies: Sequence[Policy], index: int, count: int) -> list[Policy]:
    """The policies whose workload belongs to shard ``index`` of ``count``."""
    return [p for p in policies if shard_of(p.workload.key, count) == index]
