"""Sharding workloads across controller replicas: every workload in exactly one shard, stably."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scaleahead.bench.speed import policies_for
from scaleahead.errors import UserError
from scaleahead.sharding import owned, parse_shard, shard_of


def test_shards_partition_the_workloads_and_are_balanced() -> None:
    policies = policies_for(3000, 10.0)
    parts = [owned(policies, i, 3) for i in range(3)]
    keys = [p.workload.key for part in parts for p in part]
    assert sorted(keys) == sorted(p.workload.key for p in policies)
    assert all(850 <= len(part) <= 1150 for part in parts), [len(p) for p in parts]


# Shards of known keys, computed once outside Python from the documented rule (SHA-1 of
# "Kind/namespace/name", first 8 bytes big-endian, mod N):
#   printf %s "$key" | sha1sum | cut -c1-16   then   echo "ibase=16; $HEX % 4" | bc
# key -> (first 8 bytes in hex, shard of 4, shard of 7)
KNOWN_SHARDS = {
    "Deployment/shop/web": ("9268A1B127123AF6", 2, 3),
    "Deployment/shop/api": ("6464532350C49FF0", 0, 5),
    "StatefulSet/db/pg": ("FB9E591C46A59E0F", 3, 0),
    "Deployment/default/a": ("32FBE52886F44673", 3, 0),
    "Deployment/bench/w0": ("5FEA3319BB0C401B", 3, 1),
    "Deployment/bench/w1": ("B3CA05705EFB964A", 2, 0),
    "Deployment/bench/w2": ("4A3120C42728A714", 0, 5),
    "Deployment/bench/w3": ("CD7C8D70B57661A7", 3, 0),
    "Deployment/bench/w4": ("8C58C80F8987F155", 1, 2),
    "Deployment/bench/w5": ("62234BF7335EEFA7", 3, 1),
    "Deployment/bench/w6": ("E84484779B6B80BA", 2, 3),
    "Deployment/bench/w7": ("04092FF51002DE91", 1, 3),
    "Deployment/bench/w8": ("59396FD2936920ED", 1, 6),
    "Deployment/bench/w9": ("5131C563C4CF75C7", 3, 4),
}


def test_known_workloads_land_in_their_documented_shards() -> None:
    for key, (prefix, of4, of7) in KNOWN_SHARDS.items():
        # The pinned numbers are themselves consistent with the rule (guards a typo in the table).
        assert (int(prefix, 16) % 4, int(prefix, 16) % 7) == (of4, of7), key
        assert (shard_of(key, 4), shard_of(key, 7)) == (of4, of7), key
        assert shard_of(key, 1) == 0


def test_a_workload_keeps_its_shard_whatever_else_is_added() -> None:
    few = policies_for(10, 10.0)
    many = policies_for(500, 10.0)
    expected = [KNOWN_SHARDS[p.workload.key][1] for p in few]
    assert [shard_of(p.workload.key, 4) for p in few] == expected
    assert [shard_of(p.workload.key, 4) for p in many[:10]] == expected
    assert [p for p in owned(many, 2, 4) if p.workload.key in KNOWN_SHARDS] == [
        p for p in many[:10] if KNOWN_SHARDS[p.workload.key][1] == 2
    ]


def test_every_process_agrees_on_the_shards_whatever_its_hash_seed() -> None:
    """Two replicas started with different PYTHONHASHSEED must split the workloads the same way."""
    keys = sorted(KNOWN_SHARDS)
    script = (
        "import json, sys\n"
        "from scaleahead.sharding import shard_of\n"
        "keys = json.loads(sys.argv[1])\n"
        "print(json.dumps([[shard_of(k, 4), shard_of(k, 7)] for k in keys]))\n"
    )
    here = [[shard_of(k, 4), shard_of(k, 7)] for k in keys]
    root = Path(__file__).resolve().parents[2]
    for seed in ("1", "2", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(keys)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert json.loads(out.stdout) == here, f"PYTHONHASHSEED={seed}"


@pytest.mark.parametrize("text", ["3/3", "x/2", "1", "-1/2", "0/0"])
def test_a_bad_shard_spec_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError):
        parse_shard(text)


def test_a_good_shard_spec_parses() -> None:
    assert parse_shard("2/5") == (2, 5)


def test_each_journal_row_is_reconciled_by_exactly_one_shard_even_without_its_policy() -> None:
    """A planned action of a policy deleted since (no shard has it any more) is still reconciled,
    by the shard its workload hashes to; pod moves by shard 0, which alone rebalances."""
    from types import SimpleNamespace

    from scaleahead.commands.run import _reconciler

    rows = [SimpleNamespace(kind="ScaleTo", target=f"Deployment/shop/deleted-{i}") for i in range(30)]
    rows.append(SimpleNamespace(kind="MovePod", target="Pod/shop/web-1"))
    owners: dict[int, list[int]] = {i: [] for i in range(len(rows))}
    for index in range(3):
        seen: list = []

        class Actuator:
            policies: dict = {}  # noqa: RUF012 - a stand-in: this shard's policies (none left)

            def reconcile(self, now, owns, budget_s=None):  # type: ignore[no-untyped-def]
                seen.append(owns)
                return []

        _reconciler(Actuator(), f"{index}/3")(0.0)
        for i, row in enumerate(rows):
            if seen[0](row):
                owners[i].append(index)
    assert all(len(v) == 1 for v in owners.values()), owners
    assert owners[len(rows) - 1] == [0]


def _tenant_policies(n: int, tenant_of: Callable[[int], str]) -> list:
    from scaleahead.policy import parse_policies

    text = "\n---\n".join(
        f"""
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: w{i}, namespace: shop}}
spec:
  target: {{kind: Deployment, name: w{i}}}
  capacityPerReplica: 10
  maxReplicas: {5 + 7 * (i % 4)}
  tenant: {tenant_of(i)}
  demand: {{query: 'x', stepSeconds: 10}}
"""
        for i in range(n)
    )
    return parse_policies(text)


@pytest.mark.parametrize("count", [2, 3, 5])
def test_shard_limits_add_up_to_the_configured_totals(count: int) -> None:
    """Every shard computes the same split: the parts of each capacity add up to it exactly, each in
    proportion to what its shard's workloads of that tenant can hold at most."""
    from scaleahead.sharding import shard_limits

    policies = _tenant_policies(40, lambda i: "shop" if i % 3 else "blog")
    capacity = {"shop": 101, "blog": 17, "*": 200, "nobody": 9}
    parts = [shard_limits(capacity, None, policies, i, count) for i in range(count)]
    for tenant in ("shop", "blog", "*"):
        assert sum(p.capacity[tenant] for p in parts) == capacity[tenant], tenant
    # a tenant no policy has limits nothing: it keeps its number everywhere
    assert all(p.capacity["nobody"] == 9 for p in parts)
    # each shard's floors (minReplicas) first, the rest in proportion to what its workloads can add
    # above them (each within one unit of its exact part)
    for tenant in ("shop", "blog"):
        members = [p for p in policies if p.spec.tenant == tenant]
        floors = sum(p.spec.min_replicas for p in members)
        assert floors < capacity[tenant]
        heads = sum(p.spec.max_replicas - p.spec.min_replicas for p in members)
        for i, part in enumerate(parts):
            mine = owned(members, i, count)
            floor = sum(p.spec.min_replicas for p in mine)
            head = sum(p.spec.max_replicas - p.spec.min_replicas for p in mine)
            exact = floor + (capacity[tenant] - floors) * head / heads
            assert abs(part.capacity[tenant] - exact) < 1.0, (tenant, i)
    assert all(p.warm_memory_budget_mb is None for p in parts)
    # one shard: the totals unchanged
    assert shard_limits(capacity, 512.0, policies, 0, 1).capacity == capacity


def test_a_huge_max_replicas_counts_as_no_more_than_the_capacity() -> None:
    """maxReplicas 10**9 ("unbounded") weighs as much as the capacity itself, no more: the other
    shard still gets its part."""
    from scaleahead.sharding import shard_limits

    policies = _tenant_policies(12, lambda i: "shop")

    def with_max(n: int) -> list:
        first = policies[0].model_copy(update={"spec": policies[0].spec.model_copy(update={"max_replicas": n})})
        return [first, *policies[1:]]

    huge = [shard_limits({"shop": 60}, None, with_max(10**9), i, 2).capacity["shop"] for i in range(2)]
    capped = [shard_limits({"shop": 60}, None, with_max(60), i, 2).capacity["shop"] for i in range(2)]
    assert huge == capped
    assert min(huge) > 0


def _with(policy, **spec):  # type: ignore[no-untyped-def]
    return policy.model_copy(update={"spec": policy.spec.model_copy(update=spec)})


def test_each_shard_gets_its_floors_before_the_rest_is_split() -> None:
    """Found in review: split by maxReplicas alone, a shard whose workload has min = max = 10 got 7 of
    a capacity of 20 although every minReplicas (11 in all) fits in it; the planner then cut that
    workload below its minReplicas, which unsharded it never does."""
    from scaleahead.sharding import shard_limits

    policies = _tenant_policies(12, lambda i: "shop")
    fixed = _with(policies[0], min_replicas=10, max_replicas=10)
    home = shard_of(fixed.workload.key, 2)
    # its shard holds it alone; the other shard's workloads can hold 40 each
    others = [_with(p, min_replicas=0, max_replicas=40) for p in policies[1:] if shard_of(p.workload.key, 2) != home]
    assert others
    everyone = [fixed, *others]
    parts = [shard_limits({"*": 20}, None, everyone, i, 2).capacity["*"] for i in range(2)]
    assert sum(parts) == 20
    assert parts[home] >= 10
    # floors that alone exceed the capacity share it in proportion to them
    tight = [_with(p, min_replicas=4, max_replicas=9) for p in policies]
    floors = [4 * len(owned(tight, i, 2)) for i in range(2)]
    parts = [shard_limits({"*": 24}, None, tight, i, 2).capacity["*"] for i in range(2)]
    assert sum(parts) == 24
    assert all(abs(parts[i] - 24 * floors[i] / sum(floors)) < 1.0 for i in range(2))


def test_a_function_without_a_warm_pool_counts_as_the_service_it_is_planned_as() -> None:
    """Found in review: it weighed 0 (as a function with a warm pool of none), so a shard holding
    only such workloads got none of the capacity, while the planner scales them like services."""
    from scaleahead.policy import WorkloadClass
    from scaleahead.sharding import shard_limits

    policies = [_with(p, workload_class=WorkloadClass.FUNCTION) for p in _tenant_policies(12, lambda i: "shop")]
    assert not any(p.spec.warm_pool.enabled for p in policies)
    parts = [shard_limits({"*": 60}, None, policies, i, 2).capacity["*"] for i in range(2)]
    services = [
        shard_limits({"*": 60}, None, _tenant_policies(12, lambda i: "shop"), i, 2).capacity["*"] for i in range(2)
    ]
    assert parts == services and min(parts) > 0


def test_the_warm_memory_budget_is_split_by_the_shards_warm_pools() -> None:
    from scaleahead.policy import parse_policies
    from scaleahead.sharding import shard_limits

    text = "\n---\n".join(
        f"""
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: f{i}, namespace: fn}}
spec:
  target: {{kind: KnativeService, name: f{i}}}
  workloadClass: function
  capacityPerReplica: 1
  demand: {{query: 'x', stepSeconds: 60}}
  warmPool: {{enabled: true, maxInstances: {1 + i % 3}, memoryMbPerInstance: {128 * (1 + i % 2)}}}
"""
        for i in range(16)
    )
    functions = parse_policies(text)
    services = _tenant_policies(10, lambda i: "shop")  # no warm pool: they weigh nothing
    policies = functions + services
    parts = [shard_limits({}, 4096.0, policies, i, 3) for i in range(3)]
    assert sum(p.warm_memory_budget_mb or 0.0 for p in parts) == pytest.approx(4096.0)
    most = [
        sum(p.spec.warm_pool.max_instances * p.spec.warm_pool.memory_mb_per_instance for p in owned(functions, i, 3))
        for i in range(3)
    ]
    for i, part in enumerate(parts):
        assert part.warm_memory_budget_mb == pytest.approx(4096.0 * most[i] / sum(most))


def test_run_sets_each_shards_part_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    """``run --shard``'s limiter: settings hold this shard's part, recomputed from the whole set of
    policies each time they are read, with the configured totals kept aside."""
    import logging

    from scaleahead.commands.run import _shard_limiter
    from scaleahead.settings import Settings

    policies = _tenant_policies(30, lambda i: "shop")
    settings = Settings()
    settings.loop.capacity = {"shop": 90}
    limit = _shard_limiter(settings, 1, 3)
    with caplog.at_level(logging.INFO, logger="scaleahead.run"):
        limit(policies)
        first = settings.loop.capacity["shop"]
        limit(policies)  # unchanged: logged once
        limit(policies[:10])  # fewer policies: a new part, from the total 90, not from the last part
    assert 0 < first < 90
    logged = [r for r in caplog.records if getattr(r, "event", None) == "shard_limits"]
    assert len(logged) == 2
    from scaleahead.sharding import shard_limits

    assert settings.loop.capacity == shard_limits({"shop": 90}, None, policies[:10], 1, 3).capacity
