"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

from kubeemu import LEASES

from actuator.leader import LeaderElector

# L07: a deleted Lease is created again only after the LAST HOLDER's own (longer) lease duration.

T0 = 1_700_000_000.0


class Elapsed:
    def __init__(self):
        self.s = 0.0

    def __call__(self):
        return self.s

    def at(self, s):
        self.s = s
        return T0 + s


def test_a_deleted_lease_waits_the_last_holders_longer_duration(kube):
    real = Elapsed()
    a = LeaderElector(kube.api_client(), "default", "replica-a", lease_duration_s=60, monotonic=real)
    b = LeaderElector(kube.api_client(), "default", "replica-b", lease_duration_s=15, monotonic=real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))  # b sees a's record: leaseDurationSeconds 60
    kube.cluster.objects[LEASES, "default", "scaleahead-leader"].delete()
    assert not b.is_leader(real.at(2))
    assert a.holds(real.at(20), margin_s=10), "a acts on its renewal at 0 s for 60 s less the margin"
    assert not b.is_leader(real.at(20)), "b must not create the Lease while a may still act (60 s, not b's 15 s)"
    assert not b.is_leader(real.at(61))
    assert b.is_leader(real.at(62)), "60 s after b first saw it missing"


def holder_of(kube) -> str:
    return kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"]


def test_a_follower_shutting_down_does_not_release_the_leaders_lease(kube):
    """L09: ``release`` by a replica that does not hold the Lease leaves it alone (else a third
    replica would take over at once while the leader still acts on its renewal)."""
    real = Elapsed()
    a = LeaderElector(kube.api_client(), "default", "replica-a", lease_duration_s=15, monotonic=real)
    b = LeaderElector(kube.api_client(), "default", "replica-b", lease_duration_s=15, monotonic=real)
    c = LeaderElector(kube.api_client(), "default", "replica-c", lease_duration_s=15, monotonic=real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    b.release(real.at(2))  # b shuts down
    assert holder_of(kube) == "replica-a"
    assert a.holds(real.at(3), margin_s=10)
    assert not c.is_leader(real.at(3)), "a still holds the Lease: c must follow"
