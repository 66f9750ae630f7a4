"""Leader election with a coordination.k8s.io/v1 Lease: two replicas never act at once."""

from __future__ import annotations

from kubeemu import LEASES

from actuator.leader import LeaderElector, LeaseRecord, decide

T0 = 1_700_000_000.0


def electors(kube, duration=15):
    a = LeaderElector(kube.api_client(), "default", "replica-a", lease_duration_s=duration)
    b = LeaderElector(kube.api_client(), "default", "replica-b", lease_duration_s=duration)
    return a, b


def test_decide_creates_renews_follows_and_takes_over_an_expired_lease():
    rec = LeaseRecord("a", 15, T0, T0, 0, "7")
    assert decide(None, "a", T0, T0) == "create"
    assert decide(rec, "a", T0 + 5, T0) == "renew"
    assert decide(rec, "b", T0 + 14.9, T0) == "follow"
    assert decide(rec, "b", T0 + 15, T0) == "takeover"
    assert decide(LeaseRecord("", 15, T0, T0, 0, "7"), "b", T0 + 1, T0 + 1) == "takeover"
    # Timed from when the follower saw the record, not from the renewTime the holder wrote.
    assert decide(rec, "b", T0 + 20, T0 + 10) == "follow"


def test_a_follower_whose_clock_runs_ahead_does_not_take_over_early(kube):
    a, b = electors(kube)
    skew = 11.0  # b's clock is 11 s ahead of a's
    assert a.is_leader(T0)
    assert not b.is_leader(T0 + 1 + skew)  # b sees the lease a renewed at T0 (a's clock)
    assert not b.is_leader(T0 + 4.5 + skew), "renewTime + 15 s has passed on b's clock, 3.5 s of silence"
    assert a.holds(T0 + 4.8, margin_s=10)
    assert kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"] == "replica-a"
    assert b.is_leader(T0 + 1 + skew + 15), "a whole lease duration of silence on b's own clock"


def test_a_renewal_that_runs_past_the_lease_end_does_not_hold_it(kube):
    import time

    a, b = electors(kube, duration=2)
    assert a.is_leader(T0)
    patch = a.api.patch_namespaced_lease

    def slow_patch(*args, **kwargs):
        time.sleep(1.2)
        return patch(*args, **kwargs)

    a.api.patch_namespaced_lease = slow_patch
    # Renewed at T0 + 1, but the call ends at about T0 + 2.2, past the lease's end (T0 + 3) less
    # the 1 s margin the write needs: the actuator must not write on it.
    assert not a.holds(T0 + 1, margin_s=1)
    a.api.patch_namespaced_lease = patch
    assert a.holds(T0 + 1.5, margin_s=1), "a quick renewal holds again"


def test_the_first_replica_takes_the_lease_and_the_second_follows(kube):
    a, b = electors(kube)
    assert a.is_leader(T0)
    assert not b.is_leader(T0 + 1)
    assert "held by replica-a" in b.last_error
    lease = kube.cluster.get(LEASES, "default", "scaleahead-leader")
    assert lease["spec"]["holderIdentity"] == "replica-a"


def test_a_leader_that_keeps_renewing_keeps_the_lease(kube):
    a, b = electors(kube)
    for i in range(5):
        assert a.is_leader(T0 + 10 * i)
        assert not b.is_leader(T0 + 10 * i + 5)


def test_a_follower_takes_over_when_the_leader_stops_renewing_and_the_old_leader_stands_down(kube):
    a, b = electors(kube)
    assert a.is_leader(T0)
    assert not b.is_leader(T0 + 0.5)  # b sees a's lease
    assert not b.is_leader(T0 + 14)
    assert b.is_leader(T0 + 15.5)  # a crashed: no renewal for a whole lease duration
    lease = kube.cluster.get(LEASES, "default", "scaleahead-leader")
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not a.is_leader(T0 + 16)  # a comes back: b holds a fresh lease


def test_of_two_replicas_racing_for_an_expired_lease_only_one_wins(kube):
    a, b = electors(kube)
    c = LeaderElector(kube.api_client(), "default", "replica-c", lease_duration_s=15)
    assert c.is_leader(T0)
    assert not a.is_leader(T0 + 1)  # a and b see c's lease, which then expires
    assert not b.is_leader(T0 + 1)
    stale = b._read()  # b reads the expired lease ...
    assert a.is_leader(T0 + 20)  # ... a takes it over first ...
    b._read = lambda: stale  # ... and b writes with the version it read
    assert not b.is_leader(T0 + 20)
    assert "409" in b.last_error
    assert kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"] == "replica-a"


def test_a_released_lease_is_taken_over_at_once(kube):
    a, b = electors(kube)
    assert a.is_leader(T0)
    a.release(T0 + 1)
    assert b.is_leader(T0 + 2)


def test_an_api_error_means_not_leader(kube):
    from kubeemu import Fault

    a, _ = electors(kube)
    assert a.is_leader(T0)
    kube.cluster.faults.append(Fault("PATCH", "/leases/scaleahead-leader", status=500))
    assert not a.is_leader(T0 + 5)
    assert a.is_leader(T0 + 10)


def test_two_actuator_replicas_never_act_at_once(kube):
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    a, b = electors(kube)
    pols = [policy()]
    act_a = Actuator(KubernetesTarget(kube.api_client(), pols), None, pols, is_leader=a.is_leader)
    act_b = Actuator(KubernetesTarget(kube.api_client(), pols), None, pols, is_leader=b.is_leader)
    web = WorkloadRef("Deployment", "default", "web")

    def plan(t, frm, to):
        return Plan(t, (ScaleTo(web, frm, to, Reason("t", "t")),))

    assert act_a.apply_plan(plan(T0, 2, 3), T0)[0].outcome == "applied"
    follower = act_b.apply_plan(plan(T0 + 1, 3, 9), T0 + 1)[0]
    assert follower.outcome == "skipped" and "not the leader" in follower.detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 3
    # a dies; after a lease duration b takes over and acts.
    assert act_b.apply_plan(plan(T0 + 20, 3, 5), T0 + 20)[0].outcome == "applied"
    assert act_a.apply_plan(plan(T0 + 21, 5, 7), T0 + 21)[0].outcome == "skipped"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 5


def test_a_replica_that_loses_the_lease_mid_plan_stops_before_its_next_write(kube):
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    for name in ("one", "two"):
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(2))
    a, b = electors(kube)
    pols = [policy("one"), policy("two")]
    checks = []

    def a_then_b_takes_over(now):
        checks.append(now)
        if len(checks) == 3:  # between the first write and the second, b takes the lease over
            a.release(now)
            assert b.is_leader(now)
        return a.is_leader(now)

    act = Actuator(KubernetesTarget(kube.api_client(), pols), None, pols, is_leader=a_then_b_takes_over)
    r = Reason("t", "t")
    plan = Plan(T0, tuple(ScaleTo(WorkloadRef("Deployment", "default", n), 2, 4, r) for n in ("one", "two")))
    res = act.apply_plan(plan, T0)
    assert [x.outcome for x in res] == ["applied", "skipped"]
    assert "lost the lease" in res[1].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "two")["spec"]["replicas"] == 2


def test_holds_asks_the_api_only_when_less_than_the_margin_is_left(kube):
    a, b = electors(kube)
    assert a.is_leader(T0)
    before = len(kube.cluster.calls())
    assert a.holds(T0 + 4, margin_s=10)  # 11 s of the lease left: no call
    assert len(kube.cluster.calls()) == before
    assert a.holds(T0 + 6, margin_s=10)  # 9 s left: renewed (a read and a patch)
    assert len(kube.cluster.calls()) == before + 2
    assert not b.is_leader(T0 + 6.5)  # b sees the renewed lease
    assert b.is_leader(T0 + 6.5 + 15)  # a stopped renewing; b takes over once it expired
    assert not a.holds(T0 + 6.5 + 16, margin_s=10), "the lost lease is noticed at the next write"


def test_a_one_shot_process_takes_over_a_lease_its_crashed_predecessor_left(kube):
    # `run --once` reads the Lease once: a holder dead for longer than two lease durations is
    # taken over at that first read; one that may still be alive is not.
    a, _ = electors(kube)
    assert a.is_leader(T0)  # then a is killed before it releases the Lease
    soon = LeaderElector(kube.api_client(), "default", "once-1", lease_duration_s=15)
    assert not soon.is_leader(T0 + 20), "renewed 20 s ago: a may be alive on a skewed clock"
    later = LeaderElector(kube.api_client(), "default", "once-2", lease_duration_s=15)
    assert later.is_leader(T0 + 31)
    assert kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"] == "once-2"


def test_writes_to_the_lease_that_are_not_renewals_do_not_keep_a_dead_holder(kube):
    a, b = electors(kube)
    assert a.is_leader(T0)
    assert not b.is_leader(T0 + 1)
    for t in (5, 10, 15):  # a is dead; a tool annotates the Lease every 5 s (a new resourceVersion)
        kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"metadata": {"annotations": {"touched": str(t)}}})
        assert not b.is_leader(T0 + t)
    assert b.is_leader(T0 + 16.5), "a lease duration after b first saw a's last renewal"
    assert kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"] == "replica-b"
