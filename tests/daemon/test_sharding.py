"""Sharding workloads across controller replicas: every workload in exactly one shard, stably."""

from __future__ import annotations

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


def test_a_workload_keeps_its_shard_whatever_else_is_added() -> None:
    few = policies_for(10, 10.0)
    many = policies_for(500, 10.0)
    assert [shard_of(p.workload.key, 4) for p in few] == [shard_of(p.workload.key, 4) for p in many[:10]]
    assert shard_of("Deployment/shop/web", 4) == shard_of("Deployment/shop/web", 4)


@pytest.mark.parametrize("text", ["3/3", "x/2", "1", "-1/2", "0/0"])
def test_a_bad_shard_spec_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError):
        parse_shard(text)


def test_a_good_shard_spec_parses() -> None:
    assert parse_shard("2/5") == (2, 5)
