"""Sharding workloads across controller replicas: which shard owns a workload.

One process handles a few thousand workloads per 10 s cycle (docs/adr/0008). Beyond that, run N
shards (``scaleahead run --shard i/N``), each with its own leader-elected pair of replicas: a
workload belongs to shard ``stable_hash(key) mod N``. The hash is SHA-1 of ``Kind/namespace/name``
so every process, language and restart agrees, and adding a workload never moves the others.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scaleahead.errors import UserError
from scaleahead.policy import Policy, WorkloadClass


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


def _bounds(policy: Policy) -> tuple[float, float]:
    """The fewest and the most a workload holds of a replica capacity: minReplicas and maxReplicas,
    or for a function with a warm pool 0 and its maxInstances (its claim on ``loop.capacity`` is its
    warm instances; a function without one is planned as a service)."""
    spec = policy.spec
    if spec.workload_class == WorkloadClass.FUNCTION and spec.warm_pool.enabled:
        return 0.0, float(spec.warm_pool.max_instances)
    return float(spec.min_replicas), float(spec.max_replicas)


def _warm_ceiling(policy: Policy) -> float:
    """The most warm memory a function can hold (MB): maxInstances x memoryMbPerInstance, within its
    own memoryBudgetMb; 0 for a service or a function without a warm pool."""
    spec = policy.spec
    pool = spec.warm_pool
    if spec.workload_class != WorkloadClass.FUNCTION or not pool.enabled:
        return 0.0
    most = pool.max_instances * pool.memory_mb_per_instance
    return most if pool.memory_budget_mb is None else min(most, pool.memory_budget_mb)


def _weights(policies: Sequence[Policy], count: int, size: Callable[[Policy], float], cap: float) -> list[float]:
    """Per shard, the sum of its policies' ``size``, each at most ``cap`` (no workload can use more
    than the whole limit, so a huge maxReplicas does not take the whole of it)."""
    out = [0.0] * count
    for p in policies:
        out[shard_of(p.workload.key, count)] += min(size(p), cap)
    return out


def _capacity_parts(limit: int, members: Sequence[Policy], count: int) -> list[int]:
    """``limit`` split among the shards: first each shard's floors (its workloads' minReplicas, which
    the planner serves first), then what is left in proportion to what each shard's workloads can
    add above them (maxReplicas - minReplicas, each at most what is left). Floors that alone exceed
    the limit share it in proportion to them."""
    floors = _weights(members, count, lambda p: _bounds(p)[0], math.inf)
    total = sum(floors)
    if total >= limit:
        return _largest_remainders(limit, floors)
    base = [int(f) for f in floors]
    left = limit - sum(base)
    room = _weights(members, count, lambda p: _bounds(p)[1] - _bounds(p)[0], float(left))
    return [b + r for b, r in zip(base, _largest_remainders(left, room), strict=True)]


def _largest_remainders(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` in whole units that add up to it exactly: floors,
    then one more unit to the largest remainders (ties: the lower shard). No weight: equal parts."""
    if sum(weights) <= 0:
        weights = [1.0] * len(weights)
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


@dataclass(frozen=True, slots=True)
class ShardLimits:
    """This shard's part of the limits set for all workloads together."""

    capacity: dict[str, int]
    warm_memory_budget_mb: float | None


def shard_limits(
    capacity: Mapping[str, int],
    warm_memory_budget_mb: float | None,
    policies: Sequence[Policy],
    index: int,
    count: int,
) -> ShardLimits:
    """Split ``loop.capacity`` and ``loop.warm_memory_budget_mb`` among ``count`` shards; shard
    ``index``'s part.

    Each shard plans only its own workloads, so a limit meant for all of them, given whole to every
    shard, would allow up to ``count`` times as much. Every shard computes the same split from the
    same (unsharded) ``policies``, so the parts add up to the limit exactly. A tenant's capacity (and
    ``*``, over all policies) goes first to each shard's floors (its workloads' minReplicas), then
    in proportion to what they can add above them (maxReplicas - minReplicas; a function's warm
    pool 0 to maxInstances; each at most what is left), in whole replicas by largest remainders;
    the warm-memory budget in proportion to each shard's warm pools' most memory (maxInstances x
    memoryMbPerInstance, within memoryBudgetMb). A tenant no policy has keeps its number (it limits
    nothing). The split follows neither demand nor priority: one shard's room is not lent to
    another's shortage, and a high-priority workload competes only within its shard
    (docs/adr/0008).
    """
    if count == 1:
        return ShardLimits(dict(capacity), warm_memory_budget_mb)
    shares: dict[str, int] = {}
    for tenant, limit in capacity.items():
        members = list(policies) if tenant == "*" else [p for p in policies if p.spec.tenant == tenant]
        if not members:
            shares[tenant] = limit
            continue
        shares[tenant] = _capacity_parts(limit, members, count)[index]
    budget = warm_memory_budget_mb
    if budget is not None:
        weights = _weights(policies, count, _warm_ceiling, budget)
        whole = sum(weights)
        budget = budget * (weights[index] / whole if whole > 0 else 1.0 / count)
    return ShardLimits(shares, budget)
