"""Fairness under shortage: who gets replicas when capacity or quota cannot cover every forecast.

When the replicas the per-workload decisions ask for exceed a capacity (a tenant's quota, a
namespace's pod quota or the cluster's total; ``allocate_pools`` applies them in that order, a
scoped quota's pools before the namespaces'), they
are allocated in two rounds, each by *priority first*, then by *weighted
max-min across tenants* within a priority, then weighted max-min across the workloads of a tenant:

1. floors: every workload's ``Claim.floor`` (or less, if it asks for less): its ``minReplicas``,
   and for a service what demand observed now needs of the replicas it has (``planner.planning``);
2. the rest of what each workload asked for.

A higher priority is served in full before a lower one gets anything in the same round. Within a
priority, water-filling gives each tenant ``min(demand, level * weight)`` for the level that uses the
capacity up (a tenant's weight is the mean ``weight`` of its workloads at that priority), so no
tenant can get more without one with a smaller weighted share getting less. Integer units left by
rounding go to the largest fractional shares (ties by name, so the result is deterministic).

Every cut is explained: the workload, what it asked for, what it got, the capacity it shared, and
which priority or share decided it. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scaleahead.types import WorkloadRef

#: The ``capacity`` key that limits all workloads together (other keys are tenant names).
CLUSTER = "*"


@dataclass(frozen=True, slots=True)
class Claim:
    """What one workload asks for under a capacity."""

    workload: WorkloadRef
    tenant: str
    priority: int
    weight: float
    want: int
    #: Served before the rest (``allocate``'s first round): minReplicas, and for a service what
    #: demand observed now needs of the replicas it has (``planner.planning``, since 2026-12-07).
    floor: int = 0
    fairness: float = 1.0  # the policy's objective.fairness: inequality aversion (alpha_fill)
    #: What one replica counts against ResourceQuotas ("requests.cpu" in millicores,
    #: "requests.memory" in MiB, "limits.cpu", "limits.memory"); None: unknown.
    shape: Mapping[str, int] | None = None
    #: Replicas it cannot give up this cycle (``max(minReplicas, current - maxStepDown)``): the
    #: actuator would keep them whatever the grant, so they are held off the top of every pool, and
    #: a cut of them would only hand another workload replicas that are not free.
    keep: int = 0


@dataclass(frozen=True, slots=True)
class Grant:
    """What one workload gets, and why it got less than it asked for (empty when it did not)."""

    claim: Claim
    granted: int
    why: str = ""

    @property
    def short(self) -> int:
        return self.claim.want - self.granted


def water_fill(demands: Sequence[float], weights: Sequence[float], capacity: float) -> list[float]:
    """Weighted max-min shares: ``min(demand, level * weight)`` summing to ``capacity`` (or all demand)."""
    if len(demands) != len(weights):
        raise ValueError("demands and weights differ in length")
    if any(w <= 0 for w in weights):
        raise ValueError("weights must be positive")
    total = sum(demands)
    if total <= capacity:
        return [float(d) for d in demands]
    order = sorted(range(len(demands)), key=lambda i: demands[i] / weights[i])
    shares = [0.0] * len(demands)
    left = float(max(capacity, 0.0))
    # The weights not yet served, summed from the end: exact enough even when they span many
    # orders of magnitude (alpha_fill's weights can), where subtracting would leave 0 or less.
    suffix = [0.0] * (len(order) + 1)
    for pos in range(len(order) - 1, -1, -1):
        suffix[pos] = suffix[pos + 1] + weights[order[pos]]
    for pos, i in enumerate(order):
        wsum = suffix[pos]
        # ``left * (w / wsum)``, never ``(left / wsum) * w``: with weights near 1e-300 (alpha_fill's
        # can be) the level ``left / wsum`` overflows to inf and would grant every demand in full.
        if wsum <= 0 or demands[i] <= left * (weights[i] / wsum):
            shares[i] = float(min(demands[i], max(left, 0.0)))
            left -= shares[i]
        else:
            for j in order[pos:]:
                shares[j] = min(float(demands[j]), left * (weights[j] / wsum))
            break
    return shares


def alpha_fill(demands: Sequence[float], weights: Sequence[float], capacity: float, alpha: float) -> list[float]:
    """Weighted alpha-fair shares: maximize ``sum(w * U(x))`` with ``U(x) = x^(1-alpha) / (1-alpha)``
    (``log x`` at alpha 1), ``0 <= x <= demand``, ``sum(x) = min(capacity, sum(demand))``.

    With linear shares the optimum is ``x = min(demand, level * w^(1/alpha))`` (KKT: ``w x^-alpha``
    is the same for everyone below their demand), so it is :func:`water_fill` with the weights
    raised to ``1/alpha`` (Mo and Walrand 2000):

    - ``alpha = 1`` (the default): shares in proportion to the weights (weighted max-min);
    - ``alpha -> inf``: equal shares whatever the weights (max-min);
    - ``alpha = 0``: all to the highest weight first, then the next (the weight as a soft priority;
      equal weights share equally, the limit of small alpha; so is any alpha up to 1e-6).
    """
    if len(demands) != len(weights):
        raise ValueError("demands and weights differ in length")
    if any(w <= 0 for w in weights):
        raise ValueError("weights must be positive")
    if alpha < 0 or math.isnan(alpha):
        raise ValueError("alpha must be at least 0")
    if alpha == 1.0:
        return water_fill(demands, weights, capacity)
    if alpha <= 1e-6:  # 0, or so close that w^(1/alpha) overflows: the limit, tier by tier
        shares = [0.0] * len(demands)
        left = float(max(capacity, 0.0))
        for w in sorted(set(weights), reverse=True):
            tier = [i for i, x in enumerate(weights) if x == w]
            got = water_fill([demands[i] for i in tier], [1.0] * len(tier), left)
            for i, g in zip(tier, got, strict=True):
                shares[i] = g
            left -= sum(got)
            if left <= 0:
                break
        return shares
    logs = [math.log(w) / alpha for w in weights]
    top = max(logs)
    # Ratios beyond e^700 are not representable: such weights count as tied at the bottom.
    return water_fill(demands, [math.exp(max(x - top, -700.0)) for x in logs], capacity)


def _integer_shares(demands: Sequence[int], shares: Sequence[float], capacity: int, names: Sequence[str]) -> list[int]:
    """Round shares down, then hand out the units left to the largest fractions (ties by name)."""
    base = [min(d, int(math.floor(s + 1e-9))) for d, s in zip(demands, shares, strict=True)]
    left = min(capacity, sum(demands)) - sum(base)
    order = sorted(
        (i for i in range(len(base)) if base[i] < demands[i]),
        key=lambda i: (-(shares[i] - base[i]), names[i]),
    )
    for i in order:
        if left <= 0:
            break
        base[i] += 1
        left -= 1
    return _trim(base, min(capacity, sum(demands)), [1] * len(base), names)


def _trim(out: list[int], capacity: int, costs: Sequence[int], names: Sequence[str]) -> list[int]:
    """Never more than ``capacity``: should rounding of float shares ever overshoot, take replicas
    back from the largest grants (ties by name). A guard; the shares above keep within it."""
    over = sum(o * c for o, c in zip(out, costs, strict=True)) - max(capacity, 0)
    while over > 0:
        i = max((k for k in range(len(out)) if out[k] > 0), key=lambda k: (out[k] * costs[k], names[k]))
        out[i] -= 1
        over -= costs[i]
    return out


def _tenant_weight(claims: Sequence[Claim], idx: Sequence[int], amounts: Sequence[int]) -> float:
    """A tenant's weight: the mean ``weight`` of its workloads that ask for something here (an idle
    workload with a large weight must not raise its busy siblings' share)."""
    asking = [claims[i].weight for i in idx if amounts[i] > 0] or [claims[i].weight for i in idx]
    return sum(asking) / len(asking)


def _fill_level(
    claims: Sequence[Claim], amounts: Sequence[int], capacity: int, alpha: float
) -> tuple[list[int], dict[str, float]]:
    """Alpha-fair shares across tenants, then across each tenant's workloads, for one priority;
    also each tenant's weight in that sharing (:func:`_tenant_weight`), for the reasons."""
    tenants: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        tenants[c.tenant].append(i)
    names = sorted(tenants)
    t_demand = [sum(amounts[i] for i in tenants[t]) for t in names]
    t_weight = [_tenant_weight(claims, tenants[t], amounts) for t in names]
    t_share = _integer_shares(t_demand, alpha_fill(t_demand, t_weight, capacity, alpha), capacity, names)
    out = [0] * len(claims)
    for t, share in zip(names, t_share, strict=True):
        idx = tenants[t]
        d = [amounts[i] for i in idx]
        w = [claims[i].weight for i in idx]
        got = _integer_shares(d, alpha_fill(d, w, share, alpha), share, [str(claims[i].workload) for i in idx])
        for i, g in zip(idx, got, strict=True):
            out[i] = g
    return out, dict(zip(names, t_weight, strict=True))


def _fill_level_units(
    claims: Sequence[Claim], amounts: Sequence[int], costs: Sequence[int], capacity: int, alpha: float
) -> tuple[list[int], dict[str, float]]:
    """:func:`_fill_level` when a replica of claim ``i`` takes ``costs[i]`` units of the capacity
    (millicores, MiB): the shares are alpha-fair in units, then whole replicas; the units left by
    rounding down go, one replica at a time, to the largest fractions whose replica still fits,
    pass after pass until none fits."""
    tenants: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        tenants[c.tenant].append(i)
    names = sorted(tenants)
    t_demand = [float(sum(amounts[i] * costs[i] for i in tenants[t])) for t in names]
    t_weight = [_tenant_weight(claims, tenants[t], amounts) for t in names]
    share = [0.0] * len(claims)
    for t, units in zip(names, alpha_fill(t_demand, t_weight, capacity, alpha), strict=True):
        idx = tenants[t]
        got = alpha_fill([float(amounts[i] * costs[i]) for i in idx], [claims[i].weight for i in idx], units, alpha)
        for i, g in zip(idx, got, strict=True):
            share[i] = g / costs[i]
    out = [min(a, int(math.floor(s + 1e-9))) for a, s in zip(amounts, share, strict=True)]
    left = capacity - sum(o * c for o, c in zip(out, costs, strict=True))
    order = sorted(
        (i for i in range(len(out)) if out[i] < amounts[i]),
        key=lambda i: (-(share[i] - out[i]), str(claims[i].workload)),
    )
    while order:  # pass after pass, until no short claim's next replica fits in what is left
        for i in order:
            if costs[i] <= left:
                out[i] += 1
                left -= costs[i]
        order = [i for i in order if out[i] < amounts[i] and costs[i] <= left]
    return _trim(out, capacity, costs, [str(c.workload) for c in claims]), dict(zip(names, t_weight, strict=True))


def _round(
    claims: Sequence[Claim],
    amounts: Sequence[int],
    capacity: int,
    alpha: float,
    costs: Sequence[int] | None = None,
    unit: str = "",
    before: bool = False,
) -> tuple[list[int], int, dict[int, str], dict[int, tuple[float, int]]]:
    """Serve ``amounts`` by priority (highest first); returns grants, capacity left, cut causes, and
    for each claim cut by a share its tenant's weight in that share and how many of the tenant's
    workloads asked in it (the weight is their mean, :func:`_tenant_weight`).

    With ``costs``, a replica of claim ``i`` takes ``costs[i]`` units of ``capacity``. ``before``:
    a round before this one (the minReplicas round) took some of the capacity."""
    cost = costs or [1] * len(claims)
    share = "weighted max-min share" if alpha == 1.0 else f"alpha-fair share (objective.fairness {alpha:g})"
    out = [0] * len(claims)
    causes: dict[int, str] = {}
    weights: dict[int, tuple[float, int]] = {}
    left = capacity
    for prio in sorted({c.priority for c in claims}, reverse=True):
        idx = [i for i, c in enumerate(claims) if c.priority == prio]
        need = sum(amounts[i] * cost[i] for i in idx)
        if need <= left:
            for i in idx:
                out[i] = amounts[i]
            left -= need
            continue
        if left <= 0:
            takers = [f"higher priorities than {prio}"] if left < capacity else []
            if before:  # this round comes after the floors' round
                takers.insert(
                    0, "the floors of every workload (served first: minReplicas, and what demand observed now needs)"
                )
            asking = [i for i in idx if amounts[i] > 0]
            by_tenant: dict[str, list[int]] = defaultdict(list)
            for i in asking:
                by_tenant[claims[i].tenant].append(i)
            # no share was made: the weight each tenant would have had (once per tenant, not per claim)
            would = {t: (_tenant_weight(claims, mine, amounts), len(mine)) for t, mine in by_tenant.items()}
            cut = f"{' and '.join(takers)} took all of it" if takers else "there is none to share"
            for i in asking:
                causes[i] = cut
                weights[i] = would[claims[i].tenant]
            continue
        sub = [claims[i] for i in idx]
        if costs is None:
            got, t_weight = _fill_level(sub, [amounts[i] for i in idx], left, alpha)
        else:
            got, t_weight = _fill_level_units(sub, [amounts[i] for i in idx], [cost[i] for i in idx], left, alpha)
        # Those that ask in this round: the workloads the share is among (a tenant's weight is theirs).
        n_asking: dict[str, int] = defaultdict(int)
        for i in idx:
            if amounts[i] > 0:
                n_asking[claims[i].tenant] += 1
        among = f"{share} among the {sum(n_asking.values())} priority-{prio} workloads of the {left}{unit} left"
        for i, g in zip(idx, got, strict=True):
            out[i] = g
            if g < amounts[i]:
                causes[i] = among
                tenant = claims[i].tenant
                weights[i] = (t_weight[tenant], n_asking[tenant])
        left -= sum(g * cost[i] for i, g in zip(idx, got, strict=True))
    return out, left, causes, weights


def allocate(
    claims: Sequence[Claim],
    capacity: int,
    pool: str = "cluster capacity",
    costs: Sequence[int] | None = None,
    unit: str = "",
    hold: bool = True,
) -> list[Grant]:
    """Allocate ``capacity`` units among ``claims``: floors first, then the rest; never more than asked.

    Args:
        claims: what each workload asks for (replicas).
        capacity: units to share (replicas, or with ``costs`` millicores, MiB); negative counts as zero.
        pool: name of the capacity, used in the reasons ("cluster capacity", "tenant shop quota").
        costs: units one replica of each claim takes (all positive); None: one replica is one unit.
        unit: the units' suffix in the reasons ("m", "Mi").
        hold: hold what the claims cannot give up this cycle (``Claim.keep``; :func:`_hold_kept`);
            False: the fair grants alone.

    Returns:
        One grant per claim, in the same order; ``sum(granted) <= max(capacity, 0)``, unless what
        the claims must keep this cycle (``Claim.keep``) exceeds it: then each gets its ``keep``.

    Within a priority the shares are alpha-fair (:func:`alpha_fill`) with the largest
    ``fairness`` among the claims: the most inequality-averse policy sets how the pool is shared,
    so no policy can make another tenant's share depend more on the weights than it asked for.
    """
    cap = max(int(capacity), 0)
    wants = [max(c.want, 0) for c in claims]
    if costs is not None and any(c <= 0 for c in costs):
        raise ValueError("costs must be positive")
    total = sum(w * c for w, c in zip(wants, costs, strict=True)) if costs is not None else sum(wants)
    if total <= cap:
        return [Grant(c, w) for c, w in zip(claims, wants, strict=True)]
    if hold:
        keeps = [min(max(c.keep, 0), w) for c, w in zip(claims, wants, strict=True)]
        if any(keeps):
            fair = allocate(claims, capacity, pool, costs, unit, hold=False)
            return _hold_kept(claims, fair, keeps, cap, pool, costs, unit)
    floors = [min(max(c.floor, 0), w) for c, w in zip(claims, wants, strict=True)]
    alpha = max((c.fairness for c in claims), default=1.0)
    first, left, causes_a, weights_a = _round(claims, floors, cap, alpha, costs, unit)
    rest = [w - f for w, f in zip(wants, first, strict=True)]
    # Claims whose floor was cut get nothing more in the second round.
    rest = [0 if first[i] < floors[i] else r for i, r in enumerate(rest)]
    second, _, causes_b, weights_b = _round(claims, rest, left, alpha, costs, unit, before=left < cap)
    grants = []
    for i, c in enumerate(claims):
        got = first[i] + second[i]
        why = ""
        if got < wants[i]:
            cause = causes_a.get(i) or causes_b.get(i) or "capacity exhausted"
            stage = (
                "even its floor did not fit (minReplicas, or what demand observed now needs of the replicas it has): "
                if i in causes_a
                else ""
            )
            # The tenant's weight in the round that cut it (the mean over its workloads asking in
            # that round, as the share used or, with none left to share, would have used).
            tenant_w, n = (weights_a if i in causes_a else weights_b).get(i) or (c.weight, 1)
            own = f", this workload's {c.weight:g}" if n > 1 and c.weight != tenant_w else ""
            # "got N of M" is this workload's (an audit read it as the tenant's)
            why = (
                f"{pool} {cap}{unit} is short of the {total}{unit} wanted; this workload got {got} of {wants[i]} "
                f"(tenant {c.tenant}, priority {c.priority}, weight {tenant_w:g}{own}): {stage}{cause}"
            )
        grants.append(Grant(c, got, why))
    return grants


def _hold_kept(
    claims: Sequence[Claim],
    fair: Sequence[Grant],
    keeps: Sequence[int],
    cap: int,
    pool: str,
    costs: Sequence[int] | None,
    unit: str,
) -> list[Grant]:
    """The fair grants, where some cannot be met this cycle: a workload whose fair grant is below
    what it must keep (``Claim.keep``: minReplicas, or its current replicas less maxStepDown) keeps
    that, and the others share what is left, each up to its fair grant, so that nobody is handed
    replicas that are not free yet. Cycle by cycle the held workloads step down to their fair
    share. Only when what must be kept exceeds the pool does the total exceed it, which the held
    workloads' reasons say."""
    cost = costs or [1] * len(claims)
    held = [i for i, g in enumerate(fair) if g.granted < keeps[i]]
    if not held:
        return list(fair)
    out = list(fair)
    kept = sum(keeps[i] * cost[i] for i in held)
    # what must be kept alone exceeds the pool (minReplicas, or current counts far above a new,
    # smaller capacity that maxStepDown lets down only a step a cycle): said, not silent (audit)
    over = (
        f"; {pool} {cap}{unit} is exceeded by {kept - cap}{unit} this cycle: what the held workloads must keep "
        "does not fit"
        if kept > cap
        else ""
    )
    for i in held:
        note = f"held at {keeps[i]} this cycle: it gives up at most maxStepDown replicas a cycle, down to minReplicas"
        out[i] = Grant(claims[i], keeps[i], f"{fair[i].why}; {note}{over}" if fair[i].why else "")
    held_set = set(held)
    others = [i for i in range(len(claims)) if i not in held_set]
    if not others:
        return out
    left = cap - sum(keeps[i] * cost[i] for i in held)
    sub = allocate(
        [replace(claims[i], want=fair[i].granted) for i in others],
        left,
        pool,
        None if costs is None else [costs[i] for i in others],
        unit,
    )
    for i, g in zip(others, sub, strict=True):
        if g.granted < fair[i].granted:
            why = (
                f"{pool} {cap}{unit}: its fair share is {fair[i].granted}, but {cap - max(left, 0)}{unit} of the pool "
                f"are held this cycle by workloads stepping down to theirs; got {g.granted}"
            )
            out[i] = Grant(claims[i], g.granted, "; ".join(x for x in (fair[i].why, why) if x))
    return out


def _share_pool(
    claims: Sequence[Claim],
    grants: list[Grant],
    idx: Sequence[int],
    cap: int,
    pool: str,
    key: str | None = None,
    unit: str = "",
) -> tuple[int, list[int]]:
    """Share ``cap`` among the claims ``idx`` as they stand after earlier pools; returns (wanted, cut).

    With ``key`` (a ResourceQuota resource) the capacity is in that resource's units and a replica
    of claim ``i`` takes ``claims[i].shape[key]`` of it (every claim in ``idx`` must ask for some)."""
    reduced = [
        Claim(
            claims[i].workload,
            claims[i].tenant,
            claims[i].priority,
            claims[i].weight,
            grants[i].granted,
            min(claims[i].floor, grants[i].granted),
            claims[i].fairness,
            claims[i].shape,
            min(claims[i].keep, grants[i].granted),
        )
        for i in idx
    ]
    costs = None if key is None else [(c.shape or {})[key] for c in reduced]
    wanted = sum(r.want * (1 if costs is None else costs[n]) for n, r in enumerate(reduced))
    cut = []
    for i, r, g in zip(idx, reduced, allocate(reduced, cap, pool=pool, costs=costs, unit=unit), strict=True):
        if g.granted < r.want:
            grants[i] = Grant(claims[i], g.granted, "; ".join(x for x in (grants[i].why, g.why) if x))
            cut.append(i)
    return wanted, cut


def _mixed_fairness(claims: Sequence[Claim], idx: Sequence[int]) -> str:
    """A note's tail when a pool's policies disagree on objective.fairness (the largest is used)."""
    values = {claims[i].fairness for i in idx}
    if len(values) < 2:
        return ""
    return (
        f" (their policies' objective.fairness range from {min(values):g} to {max(values):g}: shared at "
        f"{max(values):g}, the most even)"
    )


#: Passes of ``allocate_pools`` at most: a later pool's cuts handed back to the tenant quotas.
RESHARE_PASSES = 8


def allocate_pools(
    claims: Sequence[Claim],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int] | None = None,
    namespace_resources: Mapping[str, Mapping[str, int]] | None = None,
    outside: frozenset[WorkloadRef] = frozenset(),
    members: Mapping[str, frozenset[WorkloadRef]] | None = None,
    scope: str = "",
) -> tuple[list[Grant], list[str]]:
    """``_allocate_pools_once``, and what a later pool cut handed back to the tenant quotas.

    ``scope``: what ``capacity`` is a part of, put before its pools' names in the reasons and
    notes (``run --shard 2/3``: "shard 2/3's part of the ", so "shard 2/3's part of the cluster
    capacity 12 is short ..."; loop reasons audit: a shard's part read as the cluster's capacity).

    The pools are applied in one order (tenant quotas first). When a later pool (a namespace
    quota, the cluster) cuts a workload below what its tenant quota granted it, that share of the
    tenant's quota would go unused while another workload of the tenant was cut by it; so the
    pools are applied again with the cut workloads held at what they got (their reasons kept),
    at most ``RESHARE_PASSES`` times. Grants never exceed any pool either way.
    """
    tenants = {t: q for t, q in capacity.items() if t != CLUSTER}
    grants, by_pool, first = _allocate_pools_once(
        claims, capacity, namespace_pods, namespace_resources, outside, members, scope=scope
    )
    notes = list(by_pool.values())
    if not tenants or not (namespace_pods or namespace_resources or CLUSTER in capacity):
        return grants, notes
    wants = [max(c.want, 0) for c in claims]
    held: dict[int, Grant] = {}
    for _ in range(RESHARE_PASSES - 1):
        used: dict[str, int] = defaultdict(int)
        for c, g in zip(claims, grants, strict=True):
            used[c.tenant] += g.granted
        slack = {t for t, q in tenants.items() if used[t] < q}
        later = [i for i, c in enumerate(claims) if c.tenant in slack and grants[i].granted < first[i]]
        # a workload of such a tenant that its quota cut and no later pool did: it could use the slack
        # (what it asks now: a workload held at a later pool's cut is not starved by the quota)
        starved = any(
            c.tenant in slack and i not in held and first[i] < wants[i] and grants[i].granted == first[i]
            for i, c in enumerate(claims)
        )
        if not later or not starved:
            break
        for i in later:
            held[i] = grants[i]
        capped = [replace(c, want=held[i].granted) if i in held else c for i, c in enumerate(claims)]
        again, more, first = _allocate_pools_once(
            capped, capacity, namespace_pods, namespace_resources, outside, members, wants, scope
        )
        grants = [
            Grant(claims[i], g.granted, "; ".join(x for x in (held[i].why, g.why) if x))
            if i in held
            else Grant(claims[i], g.granted, g.why)
            for i, g in enumerate(again)
        ]
        # Each pool's note once, from the last pass that found it short: what a later pool cut stays
        # held, so its note stands; the tenant quotas and the cluster were shared again, so their
        # earlier notes are superseded (the cluster's names what each tenant asked at first).
        by_pool = {**{k: v for k, v in by_pool.items() if not k.startswith(("tenant:", "cluster"))}, **more}
        notes = list(by_pool.values())
    return grants, notes


def _allocate_pools_once(
    claims: Sequence[Claim],
    capacity: Mapping[str, int],
    namespace_pods: Mapping[str, int] | None = None,
    namespace_resources: Mapping[str, Mapping[str, int]] | None = None,
    outside: frozenset[WorkloadRef] = frozenset(),
    members: Mapping[str, frozenset[WorkloadRef]] | None = None,
    asked: Sequence[int] | None = None,
    scope: str = "",
) -> tuple[list[Grant], dict[str, str], list[int]]:
    """Apply tenant quotas (``capacity`` keys = tenant names), the pod, CPU and memory quotas of
    scoped ResourceQuotas (``members``), then of namespaces, then the cluster.

    ``capacity["*"]`` is the cluster's replicas; ``namespace_pods`` maps a namespace to the pods its
    ResourceQuotas let the claims' workloads in it hold together (``ClusterState.pod_quotas``);
    ``namespace_resources`` maps a namespace to ``{"requests.cpu": millicores, ...}`` they may hold
    together (``ClusterState.resource_quotas``), shared in those units among the claims whose
    ``shape`` asks for that resource. Each pool is shared among what its members were granted by
    the pools before it. Claims of the workloads in ``outside`` are in no namespace pool (their
    state was not read, so the namespace's capacity does not hold their pods). A key of
    ``namespace_pods`` / ``namespace_resources`` found in ``members`` (``namespace/quota-name``) is
    the pool of a scoped ResourceQuota, shared among those workloads only (``ClusterState.quota_members``).

    Returns the grants (same order as ``claims``), notes naming every capacity that was short, and
    what each claim held after the tenant quotas. ``asked``: what each workload asked for before a
    re-share held it (the cluster note's got/wanted per tenant); default the claims' wants.
    """
    grants = [Grant(c, max(c.want, 0)) for c in claims]
    notes: dict[str, str] = {}  # per pool, in the order the pools are applied
    by_tenant_idx: dict[str, list[int]] = defaultdict(list)
    by_namespace_idx: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        by_tenant_idx[c.tenant].append(i)
        if not outside or c.workload not in outside:
            by_namespace_idx[c.workload.namespace].append(i)
    for tenant, quota in sorted((k, v) for k, v in capacity.items() if k != CLUSTER):
        idx = by_tenant_idx.get(tenant, [])
        if not idx:
            continue
        wanted, cut = _share_pool(claims, grants, idx, quota, f"{scope}tenant {tenant} quota")
        if wanted > quota:
            if asked is not None:
                wanted = sum(asked[i] for i in idx)
            notes[f"tenant:{tenant}"] = (
                f"{scope}tenant {tenant} quota {quota} is short of the {wanted} replicas its workloads want: "
                f"{len(cut)} of them get less{_mixed_fairness(claims, idx)}"
            )
    after_tenants = [g.granted for g in grants]
    members = members or {}

    def pool_idx(pool: str) -> list[int]:
        if pool not in members:
            return by_namespace_idx.get(pool, [])
        refs = members[pool]
        return [i for i, c in enumerate(claims) if c.workload in refs and c.workload not in outside]

    def quota_on(pool: str, key: str) -> str:
        """How a pool's quota on ``key`` is named in reasons and notes."""
        return f"quota {pool} on {key}" if pool in members else f"namespace {pool}'s quota on {key}"

    # Every scoped quota's pools (pods, then CPU and memory) before the namespaces': a scoped cut
    # leaves room in the namespace's pools for the workloads it does not select.
    def share_pods(ns: str, pods: int) -> None:
        idx = pool_idx(ns)
        if not idx:
            return
        what = f"quota {ns} on pods" if ns in members else f"namespace {ns} pod quota"
        wanted, cut = _share_pool(claims, grants, idx, pods, what)
        if wanted > pods:
            head = (
                f"quota {ns} on pods leaves room for {pods} pods of the {len(idx)} managed workloads its scopes select"
                if ns in members
                else f"namespace {ns}'s pod quota leaves room for {pods} pods of its {len(idx)} managed workloads"
            )
            notes[f"pods:{ns}"] = (
                f"{head}, "
                f"short of the {wanted} replicas they want: {len(cut)} of them get less{_mixed_fairness(claims, idx)}"
            )

    def share_resources(ns: str, amounts: Mapping[str, int]) -> None:
        for key, amount in sorted(amounts.items()):
            idx = [i for i in pool_idx(ns) if (claims[i].shape or {}).get(key, 0) > 0]
            if not idx:
                continue
            unit = "m" if key.endswith("cpu") else "Mi"
            label = f"quota {ns} on {key}" if ns in members else f"namespace {ns} quota on {key}"
            wanted, cut = _share_pool(claims, grants, idx, amount, label, key, unit)
            if wanted > amount:
                notes[f"resource:{ns}:{key}"] = (
                    f"{quota_on(ns, key)} leaves {amount}{unit} for its {len(idx)} managed workloads, "
                    f"short of the {wanted}{unit} their replicas ask for: {len(cut)} of them get less"
                    f"{_mixed_fairness(claims, idx)}"
                )

    for scoped in (True, False):
        for ns, pods in sorted((namespace_pods or {}).items()):
            if (ns in members) is scoped:
                share_pods(ns, pods)
        for ns, amounts in sorted((namespace_resources or {}).items()):
            if (ns in members) is scoped:
                share_resources(ns, amounts)
    if CLUSTER in capacity:
        cap = capacity[CLUSTER]
        wanted, _ = _share_pool(claims, grants, range(len(claims)), cap, f"{scope}cluster capacity")
        if wanted > cap:
            by_tenant: dict[str, list[int]] = defaultdict(lambda: [0, 0])
            for i, (c, g) in enumerate(zip(claims, grants, strict=True)):
                by_tenant[c.tenant][0] += g.granted
                by_tenant[c.tenant][1] += asked[i] if asked is not None else max(c.want, 0)
            parts = ", ".join(f"{t} {got}/{want}" for t, (got, want) in sorted(by_tenant.items()))
            notes["cluster"] = (
                f"{scope}cluster capacity {cap} is short of the {wanted} replicas wanted; got/wanted by tenant: {parts}"
                f"{_mixed_fairness(claims, range(len(claims)))}"
            )
    return grants, notes, after_tenants
