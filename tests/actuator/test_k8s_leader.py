"""Leader election with a coordination.k8s.io/v1 Lease: two replicas never act at once.

Each elector gets a monotonic clock (``Elapsed``: the real time the test moves, which never steps)
beside the wall-clock ``now`` the test passes in; ``real.at(s)`` moves real time to ``s`` seconds
and answers the wall clock then (``T0 + s``), which a test may skew or step for one replica.
"""

from __future__ import annotations

import pytest
from kubeemu import LEASES

from actuator.leader import LeaderElector, LeaseRecord, decide, parse_time

T0 = 1_700_000_000.0


class Elapsed:
    """Seconds of real time since the test began: what ``time.monotonic`` would read."""

    def __init__(self) -> None:
        self.s = 0.0

    def __call__(self) -> float:
        return self.s

    def at(self, s: float) -> float:
        """Move real time to ``s`` seconds (never back) and answer a correct wall clock then."""
        assert s >= self.s, "real time does not go back"
        self.s = s
        return T0 + s


@pytest.fixture
def real() -> Elapsed:
    return Elapsed()


def elector(kube, real, identity, duration=15):
    return LeaderElector(kube.api_client(), "default", identity, lease_duration_s=duration, monotonic=real)


def electors(kube, real, duration=15):
    return elector(kube, real, "replica-a", duration), elector(kube, real, "replica-b", duration)


def holder_of(kube) -> str:
    return kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["holderIdentity"]


def test_decide_creates_renews_follows_and_takes_over_an_expired_lease():
    rec = LeaseRecord("a", 15, T0, T0, 0, "7")
    assert decide(None, "a", T0, T0) == "create"
    assert decide(rec, "a", T0 + 5, T0) == "renew"
    assert decide(rec, "b", T0 + 14.9, T0) == "follow"
    assert decide(rec, "b", T0 + 15, T0) == "takeover"
    assert decide(LeaseRecord("", 1, T0, T0, 0, "7"), "b", T0 + 1, T0 + 1) == "takeover"  # released
    # A holder cleared by hand (its duration kept), or a Lease deleted: a lease duration's wait.
    assert decide(LeaseRecord("", 15, T0, T0, 0, "7"), "b", T0 + 1, T0 + 1, 15) == "follow"
    assert decide(LeaseRecord("", 15, T0, T0, 0, "7"), "b", T0 + 16, T0 + 1, 15) == "takeover"
    assert decide(None, "b", T0 + 15.9, T0 + 1, 15) == "follow"
    assert decide(None, "b", T0 + 16, T0 + 1, 15) == "create"
    # Timed from when the follower saw the record, not from the renewTime the holder wrote.
    assert decide(rec, "b", T0 + 20, T0 + 10) == "follow"


def test_a_follower_whose_clock_runs_ahead_does_not_take_over_early(kube, real):
    a, b = electors(kube, real)
    skew = 11.0  # b's clock is 11 s ahead of a's
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1) + skew)  # b sees the lease a renewed at T0 (a's clock)
    assert not b.is_leader(real.at(4.5) + skew), "renewTime + 15 s has passed on b's clock, 3.5 s of silence"
    assert a.holds(real.at(4.8), margin_s=10)
    assert holder_of(kube) == "replica-a"
    assert b.is_leader(real.at(1 + 15) + skew), "a whole lease duration of silence on b's own clock"


def test_a_follower_whose_wall_clock_steps_forward_does_not_take_over_a_live_holder(kube, real):
    # F2 (A) of the 2026-12-05 time audit: b's wall clock is stepped 60 s ahead (NTP) while a is
    # alive and its last renewal only 11 s old. Until 2026-12-05 b took the Lease over then.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))  # b sees a's lease
    assert a.holds(real.at(9.9), margin_s=5), "a may write until 15 s without asking again"
    assert not b.is_leader(real.at(11) + 60), "only 10 s of silence on b's monotonic clock"
    assert holder_of(kube) == "replica-a"
    assert a.holds(real.at(11.5), margin_s=1)
    assert b.is_leader(real.at(16.5) + 60), "a whole lease duration of real silence: taken over"
    assert holder_of(kube) == "replica-b"


def test_a_holder_whose_wall_clock_steps_back_does_not_believe_it_still_holds_the_lease(kube, real):
    # F2 (B): a renews, then its wall clock is stepped 60 s back. Until 2026-12-05 a answered
    # holds() True without asking the API (its lease end was kept on the wall clock) while b,
    # on a correct clock, had taken the Lease over: two replicas wrote at once.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    assert b.is_leader(real.at(20)), "a stopped renewing: b takes over after a lease duration"
    before = len(kube.cluster.calls())
    assert not a.holds(real.at(30) - 60, margin_s=5), "a's lease ran out 15 s ago in real time"
    assert len(kube.cluster.calls()) > before, "a asked the API, which says b holds the Lease"
    assert "held by replica-b" in a.last_error
    assert holder_of(kube) == "replica-b"


def test_a_holder_whose_wall_clock_steps_forward_keeps_its_lease_for_the_real_duration(kube, real):
    # The renewal's deadline is on the monotonic clock: a wall clock stepped ahead neither ends nor
    # extends it; the wall-clock reading is only what is written into the Lease.
    a, _ = electors(kube, real)
    assert a.is_leader(real.at(0))
    before = len(kube.cluster.calls())
    assert a.holds(real.at(4) + 3600, margin_s=10), "11 s of the lease left in real time: no call"
    assert len(kube.cluster.calls()) == before
    assert a.holds(real.at(6) + 3600, margin_s=10)  # 9 s left: renewed, stamped with the wall clock
    assert len(kube.cluster.calls()) == before + 2
    renewed = kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["renewTime"]
    assert renewed.startswith("2023-11-14T23:13:26"), renewed  # T0 + 6 + 3600 s


def test_a_renewal_that_runs_past_the_lease_end_does_not_hold_it(kube, real):
    a, b = electors(kube, real, duration=2)
    assert a.is_leader(real.at(0))
    patch = a.api.patch_namespaced_lease

    def slow_patch(*args, **kwargs):
        real.at(real.s + 1.2)  # the patch takes 1.2 s
        return patch(*args, **kwargs)

    a.api.patch_namespaced_lease = slow_patch
    # Renewed at 1 s, but the call ends at 2.2 s, past the lease's end (3 s) less the 1 s margin
    # the write needs: the actuator must not write on it.
    assert not a.holds(real.at(1), margin_s=1)
    a.api.patch_namespaced_lease = patch
    assert a.holds(real.at(2.3), margin_s=1), "a quick renewal holds again"


def test_the_first_replica_takes_the_lease_and_the_second_follows(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    assert "held by replica-a" in b.last_error
    assert holder_of(kube) == "replica-a"


def test_a_leader_that_keeps_renewing_keeps_the_lease(kube, real):
    a, b = electors(kube, real)
    for i in range(5):
        assert a.is_leader(real.at(10 * i))
        assert not b.is_leader(real.at(10 * i + 5))


def test_a_follower_takes_over_when_the_leader_stops_renewing_and_the_old_leader_stands_down(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(0.5))  # b sees a's lease
    assert not b.is_leader(real.at(14))
    assert b.is_leader(real.at(15.5))  # a crashed: no renewal for a whole lease duration
    lease = kube.cluster.get(LEASES, "default", "scaleahead-leader")
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert not a.is_leader(real.at(16))  # a comes back: b holds a fresh lease


def test_of_two_replicas_racing_for_an_expired_lease_only_one_wins(kube, real):
    a, b = electors(kube, real)
    c = elector(kube, real, "replica-c")
    assert c.is_leader(real.at(0))
    assert not a.is_leader(real.at(1))  # a and b see c's lease, which then expires
    assert not b.is_leader(real.at(1))
    stale = b._read()  # b reads the expired lease ...
    assert a.is_leader(real.at(20))  # ... a takes it over first ...
    b._read = lambda: stale  # ... and b writes with the version it read
    assert not b.is_leader(real.at(20))
    assert "409" in b.last_error
    assert holder_of(kube) == "replica-a"


def test_a_released_lease_is_taken_over_at_once(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(0.5))
    a.release(real.at(1))
    spec = kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1), "client-go's release mark"
    assert b.is_leader(real.at(2))
    assert not a.holds(real.at(2), margin_s=1), "the releaser forgot its renewal"
    assert kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["leaseDurationSeconds"] == 15


def test_an_api_error_means_not_leader(kube, real):
    from kubeemu import Fault

    a, _ = electors(kube, real)
    assert a.is_leader(real.at(0))
    kube.cluster.faults.append(Fault("PATCH", "/leases/scaleahead-leader", status=500))
    assert not a.is_leader(real.at(5))
    assert a.is_leader(real.at(10))


def test_two_actuator_replicas_never_act_at_once(kube, real):
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    a, b = electors(kube, real)
    pols = [policy()]

    def asked(e):  # the actuator asks at the plan's time; real time has moved there too
        return lambda now: e.is_leader(real.at(now - T0))

    act_a = Actuator(KubernetesTarget(kube.api_client(), pols), None, pols, is_leader=asked(a))
    act_b = Actuator(KubernetesTarget(kube.api_client(), pols), None, pols, is_leader=asked(b))
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


def test_a_replica_that_loses_the_lease_mid_plan_stops_before_its_next_write(kube, real):
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    for name in ("one", "two"):
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(2))
    a, b = electors(kube, real)
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


def test_a_replica_that_loses_the_lease_while_journaling_an_intent_does_not_write(kube, real, db_url):
    """The write-ahead intent's commit took so long that b took the Lease over meanwhile: a asks
    again after the commit and does not write (until 2026-12-07 the Lease was asked only before the
    commit). b then writes, and the intent a left is read as a write that did not land, not as
    someone else's edit."""
    from kubeemu import DEPLOYMENTS, deployment, policy

    from actuator.applying import Actuator
    from actuator.kubernetes import KubernetesTarget
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
    from storage import Store

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    a, b = electors(kube, real)
    pols = [policy()]
    store = Store(db_url)
    web = WorkloadRef("Deployment", "default", "web")
    act_a = Actuator(KubernetesTarget(kube.api_client(), pols), store, pols, is_leader=a.is_leader)
    journal = act_a._commit

    def slow_commit(intent=None):  # type: ignore[no-untyped-def]
        journal(intent)
        if intent is not None:  # durable; meanwhile a stalled past its lease and b took it over
            a.release(real.at(1))
            assert b.is_leader(real.at(1))

    act_a._commit = slow_commit  # type: ignore[method-assign]
    (res,) = act_a.apply_plan(Plan(T0, (ScaleTo(web, 2, 4, Reason("t", "t")),)), T0)
    assert res.outcome == "skipped" and "lost the lease while the intent was journaled" in res.detail, res
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2
    assert [r.state for r in store.actions()] == ["skipped"]
    act_b = Actuator(KubernetesTarget(kube.api_client(), pols), store, pols, is_leader=b.is_leader)
    (done,) = act_b.apply_plan(Plan(T0 + 2, (ScaleTo(web, 2, 5, Reason("t", "t")),)), T0 + 2)
    assert done.outcome == "applied", done
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 5
    store.close()


def test_holds_asks_the_api_only_when_less_than_the_margin_is_left(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    before = len(kube.cluster.calls())
    assert a.holds(real.at(4), margin_s=10)  # 11 s of the lease left: no call
    assert len(kube.cluster.calls()) == before
    assert a.holds(real.at(6), margin_s=10)  # 9 s left: renewed (a read and a patch)
    assert len(kube.cluster.calls()) == before + 2
    assert not b.is_leader(real.at(6.5))  # b sees the renewed lease
    assert b.is_leader(real.at(6.5 + 15))  # a stopped renewing; b takes over once it expired
    assert not a.holds(real.at(6.5 + 16), margin_s=10), "the lost lease is noticed at the next write"


def test_a_one_shot_process_takes_over_a_lease_its_crashed_predecessor_left(kube, real):
    # `run --once` reads the Lease once: a holder dead for longer than two lease durations is
    # taken over at that first read; one that may still be alive is not.
    a, _ = electors(kube, real)
    assert a.is_leader(real.at(0))  # then a is killed before it releases the Lease
    soon = elector(kube, Elapsed(), "once-1")  # a new process: its monotonic clock starts afresh
    assert not soon.is_leader(real.at(20)), "renewed 20 s ago: a may be alive on a skewed clock"
    later = elector(kube, Elapsed(), "once-2")
    assert later.is_leader(real.at(31))
    assert holder_of(kube) == "once-2"


def test_writes_to_the_lease_that_are_not_renewals_do_not_keep_a_dead_holder(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    for t in (5, 10, 15):  # a is dead; a tool annotates the Lease every 5 s (a new resourceVersion)
        kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"metadata": {"annotations": {"touched": str(t)}}})
        assert not b.is_leader(real.at(t))
    assert b.is_leader(real.at(16.5)), "a lease duration after b first saw a's last renewal"
    assert holder_of(kube) == "replica-b"


def test_a_renewal_writes_the_whole_election_record_and_restores_a_hand_edited_duration(kube, real):
    # Finding 3 of the 2026-12-06 HA audit: a renewal wrote only holderIdentity and renewTime, so a
    # leaseDurationSeconds shortened by hand (to 2 s) stayed, and a follower took over whenever the
    # holder was 2 s late, while the holder still acted for its own 15 s.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    acquired = kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]["acquireTime"]
    kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"spec": {"leaseDurationSeconds": 2}})
    assert a.is_leader(real.at(1))  # a's next tick renews
    spec = kube.cluster.get(LEASES, "default", "scaleahead-leader")["spec"]
    assert spec["leaseDurationSeconds"] == 15, "the renewal restores the holder's own duration"
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-a", 0)
    assert parse_time(spec["acquireTime"]) == parse_time(acquired) == T0, "kept as the holder acquired it"
    assert not b.is_leader(real.at(1.5))  # b sees the renewed record
    assert a.holds(real.at(4.5), margin_s=10), "a acts from memory until 16 s less the margin"
    assert not b.is_leader(real.at(4.5)), "3 s of silence is not a lease duration"
    assert holder_of(kube) == "replica-a"
    assert b.is_leader(real.at(16.5)), "a whole lease duration of silence: taken over"


def test_a_duration_shortened_by_hand_between_renewals_does_not_shorten_the_followers_wait(kube, real):
    # The edit lands after a's renewal and before the next one: b waits its own lease duration,
    # not the 2 s the record now says, so it cannot take over while a acts on its renewal.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"spec": {"leaseDurationSeconds": 2}})
    assert not b.is_leader(real.at(1))  # b sees the edited record
    assert a.holds(real.at(4), margin_s=10)
    assert not b.is_leader(real.at(4)), "3 s since the edit: a may still be writing"
    assert holder_of(kube) == "replica-a"
    assert b.is_leader(real.at(16)), "15 s since b saw the record: a's hold ended"
    assert not a.holds(real.at(16), margin_s=10)


def never_both(kube, real, a, b, start, end, margin_s=10.0):
    """Ticks ``a`` and ``b`` every half second from ``start`` to ``end``, each asking just before a
    write (``holds``), as the actuator does: never may both write at one moment. Answers when each
    last and first could."""
    could: dict[str, list[float]] = {"a": [], "b": []}
    t = start
    while t <= end:
        now = real.at(t)
        a_may, b_may = a.holds(now, margin_s), b.holds(now, margin_s)
        assert not (a_may and b_may), f"both replicas may write at {t} s (Lease held by {holder_of(kube)!r})"
        for who, may in (("a", a_may), ("b", b_may)):
            if may:
                could[who].append(t)
        t += 0.5
    return could


def test_a_lease_deleted_by_hand_is_created_again_only_once_its_last_holder_stopped(kube, real):
    # Finding 2 of the 2026-12-06 HA audit: after `kubectl delete lease`, b created the Lease on
    # its next read and acted while a still acted on its last renewal (holds() answers from memory
    # for a lease duration less the margin): two replicas wrote within a second.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    kube.cluster.objects[LEASES, "default", "scaleahead-leader"].delete()
    assert not b.is_leader(real.at(2))
    assert "was deleted" in b.last_error
    could = never_both(kube, real, a, b, 2, 40)
    assert could["a"] == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5], "on its renewal at 0 s until 15 s less the margin"
    assert could["b"][0] == 17.0, "b creates it a lease duration after it first saw it missing"
    assert holder_of(kube) == "replica-b"


def test_a_holder_cleared_by_hand_is_taken_over_only_once_its_last_holder_stopped(kube, real):
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    # kubectl patch lease scaleahead-leader -p '{"spec":{"holderIdentity":""}}': not a release
    kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"spec": {"holderIdentity": ""}})
    assert not b.is_leader(real.at(2))
    assert "has no holder but was not released" in b.last_error
    could = never_both(kube, real, a, b, 2, 40)
    assert could["a"] == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    assert could["b"][0] == 17.0, "taken over a lease duration after b first saw it empty"
    assert holder_of(kube) == "replica-b"


def test_a_replica_whose_first_read_finds_no_lease_creates_it_at_once(kube, real):
    # A new cluster, or `run --once`: nothing says a holder is acting (docs: the one case a Lease
    # deleted by hand is not covered).
    a, _ = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert holder_of(kube) == "replica-a"


def test_after_the_lease_is_deleted_only_one_actuator_writes(kube):
    # The audit's end-to-end case, wired as `scaleahead run` wires it, on a virtual clock: a's
    # actuator still applied its plan a second after b had created the Lease and applied its own.
    from kubeemu import DEPLOYMENTS, deployment, policy

    from scaleahead.clock import VirtualClock
    from scaleahead.commands.run import cluster_actuation
    from scaleahead.settings import Settings
    from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy()]
    settings = Settings()
    settings.actuation.namespace = "default"
    clock = VirtualClock(T0)
    _, act_a, lead_a = cluster_actuation(kube.api_client(), None, pols, settings, clock, "pod-a")
    _, act_b, lead_b = cluster_actuation(kube.api_client(), None, pols, settings, clock, "pod-b")
    web = WorkloadRef("Deployment", "default", "web")

    def apply(act, frm, to):
        plan = Plan(clock.now(), (ScaleTo(web, frm, to, Reason("t", "t")),))
        return act.apply_plan(plan, clock.now())[0]

    assert lead_a.is_leader(clock.now())
    assert not lead_b.is_leader(clock.now())
    clock.sleep(1.0)
    kube.cluster.objects[LEASES, "default", "scaleahead-leader"].delete()
    assert not lead_b.is_leader(clock.now()), "b's tick: the Lease is missing, a may still act"
    assert apply(act_b, 2, 6).outcome == "skipped"
    clock.sleep(1.0)
    assert apply(act_a, 2, 12).outcome == "applied", "a acts on its last renewal"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 12
    clock.sleep(8.0)  # the next ticks: a sees the Lease missing and stops; b waits on
    assert not lead_a.is_leader(clock.now())
    assert not lead_b.is_leader(clock.now())
    assert apply(act_a, 12, 3).outcome == "skipped"
    clock.sleep(10.0)  # 20 s after b first saw it missing: b creates the Lease and acts
    assert lead_b.is_leader(clock.now())
    assert not lead_a.is_leader(clock.now())
    assert apply(act_b, 12, 6).outcome == "applied"
    assert apply(act_a, 6, 3).outcome == "skipped"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 6


def test_a_replica_named_holder_by_hand_acts_only_once_the_last_holder_stopped(kube, real):
    # kubectl patch lease ... -p '{"spec":{"holderIdentity":"replica-b"}}': b did not take the
    # Lease, and a may still act on its last renewal.
    a, b = electors(kube, real)
    assert a.is_leader(real.at(0))
    assert not b.is_leader(real.at(1))
    kube.cluster.edit(LEASES, "default", "scaleahead-leader", {"spec": {"holderIdentity": "replica-b"}})
    assert not b.is_leader(real.at(2))
    assert "names this replica, which did not take it" in b.last_error
    could = never_both(kube, real, a, b, 2, 40)
    assert could["a"] == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    assert could["b"][0] == 17.0, "a lease duration after b first saw itself named"
    assert holder_of(kube) == "replica-b"


def test_a_restarted_process_named_holder_at_its_first_read_renews_at_once(kube, real):
    # The same identity (a container restarted in the same pod): its earlier process is gone.
    a, _ = electors(kube, real)
    assert a.is_leader(real.at(0))
    again = elector(kube, real, "replica-a")
    assert again.is_leader(real.at(1))
