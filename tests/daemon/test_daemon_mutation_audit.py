"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

import math
from types import SimpleNamespace

from kubernetes import client
from test_policy_resources import _cr
from test_policy_resources import cluster as cluster  # the fixture, used by name

from actuator.policy_resources import GROUP, PLURAL, VERSION, ClusterPolicies, PolicyLimits
from scaleahead.settings import Settings

# D04/D05/D06: when live error counts as drift (docs: jobs.drift_min_forecasts, drift_cooldown_s.


def _daemon(daemon_factory, ref, **jobs):
    settings = Settings()
    for k, v in jobs.items():
        setattr(settings.jobs, k, v)
    daemon, clock, _, _ = daemon_factory(n=1, settings=settings, reference_error=ref)
    return daemon, clock.now()


def test_drift_needs_the_minimum_number_of_matured_forecasts(daemon_factory):
    daemon, now = _daemon(daemon_factory, 0.01, drift_min_forecasts=10)
    daemon.live = SimpleNamespace(overall=lambda: 50.0, matured=3)
    assert not daemon._drifted(now), "3 matured forecasts < drift_min_forecasts 10"
    daemon.live = SimpleNamespace(overall=lambda: 50.0, matured=10)
    assert daemon._drifted(now)


def test_drift_waits_out_the_cooldown_after_a_drift_retraining(daemon_factory):
    daemon, now = _daemon(daemon_factory, 0.01, drift_min_forecasts=2, drift_cooldown_s=3600.0)
    daemon.live = SimpleNamespace(overall=lambda: 50.0, matured=5)
    daemon.last_drift_retrain = now - 600.0
    assert not daemon._drifted(now), "10 min after the last drift retraining, cooldown 1 h"
    daemon.last_drift_retrain = now - 3600.0
    assert daemon._drifted(now)


def test_a_reference_error_of_nan_or_zero_falls_back_to_the_absolute_threshold(daemon_factory):
    for ref in (math.nan, 0.0):
        daemon, _ = _daemon(daemon_factory, ref)
        assert daemon.drift_limit() == daemon.settings.jobs.drift_threshold, ref


# PO02: of two policy objects naming one workload, a new process plans the OLDEST (creationTimestamp).


def test_the_oldest_duplicate_wins_even_when_listed_first_is_newer(cluster):
    _, api = cluster
    co = client.CustomObjectsApi(api)
    new = _cr("a-new", maxReplicas=3)
    new["spec"]["target"] = {"name": "web"}
    new["metadata"]["creationTimestamp"] = "2026-12-06T00:00:00Z"
    old = _cr("z-old", maxReplicas=40)
    old["spec"]["target"] = {"name": "web"}
    old["metadata"]["creationTimestamp"] = "2026-01-05T10:00:00Z"
    for body in (new, old):  # the newer one is created (and listed) first
        co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, body)
    listed = co.list_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL)["items"]
    assert [o["metadata"]["name"] for o in listed][0] == "a-new"
    assert [(p.metadata.name, p.spec.max_replicas) for p in ClusterPolicies(api).load()] == [("z-old", 40)]


# PO07: actuation.max_policy_priority is a hard bound: priority bound+1 is refused, the bound itself accepted.


def test_priority_just_above_the_bound_is_refused(cluster):
    _, api = cluster
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("at", priority=10))
    co.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, _cr("over", priority=11))
    source = ClusterPolicies(api, limits=PolicyLimits(max_priority=10))
    assert [p.metadata.name for p in source.load()] == ["at"]
    assert [(r.name, r.reason) for r in source.rejected] == [("over", "Refused")]
