"""The safety layer and the journal against the emulated API: dry-run, conflicts, faults, crashes, humans."""

from __future__ import annotations

import time

import pytest
from kubeemu import DEPLOYMENTS, HPAS, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef
from storage import Store

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
WEB = WorkloadRef("Deployment", "default", "web")


def scale(frm: int, to: int, name: str = "web") -> ScaleTo:
    return ScaleTo(WorkloadRef("Deployment", "default", name), frm, to, R)


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'j.db'}")
    yield s
    s.close()


def actuator(kube, store=None, policies=None, timeout_s=2.0, **cfg) -> Actuator:
    policies = [policy()] if policies is None else policies
    target = KubernetesTarget(kube.api_client(), policies, timeout_s=timeout_s)
    return Actuator(target, store, policies, SafetyConfig(**cfg))


def test_a_no_op_plan_makes_no_api_calls_at_all(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(3))
    results = actuator(kube, store).apply_plan(Plan(NOW, (scale(3, 3),)), NOW)
    assert [r.outcome for r in results] == ["skipped"]
    assert kube.cluster.calls() == []
    assert store.actions() == []


def test_a_change_already_live_makes_no_write_call(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(5))
    results = actuator(kube, store).apply_plan(Plan(NOW, (scale(3, 5),)), NOW)
    assert results[0].outcome == "skipped" and "already 5" in results[0].detail
    assert kube.cluster.writes() == []


def test_dry_run_prints_the_diff_and_writes_nothing_to_the_cluster(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(HPAS, "default", "api-hpa", {"spec": {"minReplicas": 1, "maxReplicas": 9}})
    pols = [policy(), policy("api", mode="floor", hpa="api-hpa")]
    plan = Plan(NOW, (scale(2, 6), scale(1, 4, "api")))
    results = actuator(kube, store, pols).apply_plan(plan, NOW, dry_run=True)
    assert [r.outcome for r in results] == ["dry-run", "dry-run"]
    assert results[0].detail == "Deployment/default/web spec.replicas: 2 -> 6"
    assert results[1].detail == "HorizontalPodAutoscaler/default/api-hpa spec.minReplicas: 1 -> 4"
    assert kube.cluster.writes() == []
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2
    assert {a.state for a in store.actions()} == {"dry-run"}


def test_the_journal_records_planned_then_the_outcome_with_its_reason(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    plan = Plan(NOW, (scale(2, 4), scale(1, 3, "gone")))
    actuator(kube, store, [policy(), policy("gone")]).apply_plan(plan, NOW)
    rows = {a.target: a for a in store.actions()}
    assert rows["Deployment/default/web"].state == "applied"
    assert rows["Deployment/default/web"].outcome == "Deployment/default/web spec.replicas: 2 -> 4"
    gone = rows["Deployment/default/gone"]
    assert gone.state == "failed"
    assert "Deployment/default/gone does not exist (404)" in gone.outcome
    assert "fix the policy's spec.target" in gone.outcome


def test_a_409_conflict_reads_again_rechecks_and_applies_on_the_new_version(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=409))
    results = actuator(kube, store).apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert results[0].outcome == "applied", results
    scale_calls = [c for c in kube.cluster.calls() if c[1].endswith("/web/scale")]
    assert scale_calls == [
        ("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
        ("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
        ("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
        ("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
    ]


def test_a_write_with_a_stale_resource_version_gets_a_409_and_changes_nothing(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store)
    target = act.target
    live = target.live(scale(2, 4))
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 3}})
    from actuator.base import ActuationError

    with pytest.raises(ActuationError) as err:
        target.write(scale(2, 4), 4, live)
    assert err.value.outcome == "conflict"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 3


def test_a_conflict_every_time_fails_the_action_after_the_retries(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=409, times=10))
    results = actuator(kube, store, max_conflict_retries=2).apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert results[0].outcome == "failed"
    assert "409 3 times" in results[0].detail


def test_a_500_fails_one_action_and_the_rest_of_the_plan_goes_on(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=500))
    plan = Plan(NOW, (scale(2, 4), scale(2, 5, "api")))
    results = actuator(kube, store, [policy(), policy("api")]).apply_plan(plan, NOW)
    assert [r.outcome for r in results] == ["failed", "applied"]
    assert "500" in results[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "api")["spec"]["replicas"] == 5


def test_a_timeout_fails_the_action_quickly_and_the_next_cycle_applies_it(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    # The answer comes 6 s late: the emulator runs in this process, so only a stall of 5.7 s could
    # bring it within the 0.3 s timeout; "quickly" is well under the 6 s (with room for a slow machine).
    kube.cluster.faults.append(Fault("GET", "/deployments/web/scale", delay_s=6.0))
    act = actuator(kube, store, timeout_s=0.3)
    t0 = time.perf_counter()
    first = act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert time.perf_counter() - t0 < 4.0
    assert first[0].outcome == "failed" and "no answer" in first[0].detail
    # the next cycle's read and write must answer: not within a 0.3 s timeout on a slow machine
    act.target.timeout_s = 2.0  # type: ignore[attr-defined]
    second = act.apply_plan(Plan(NOW + 10, (scale(2, 4),)), NOW + 10)
    assert second[0].outcome == "applied"


def test_rbac_forbidding_the_verb_fails_the_action_naming_the_object_and_the_fix(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    rbac = (  # what the API server says when RBAC refuses
        'deployments.apps "web" is forbidden: User "system:serviceaccount:scaleahead-system:scaleahead" '
        'cannot patch resource "deployments/scale" in API group "apps" in the namespace "default"'
    )
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=403, message=rbac))
    res = actuator(kube, store).apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert res[0].outcome == "failed"
    assert "RBAC forbids 'patch' on deployments/scale in namespace default" in res[0].detail
    assert "Deployment/default/web" in res[0].detail and "RBAC needed" in res[0].detail


def test_an_object_of_unexpected_shape_is_skipped_naming_the_field(kube, store):
    bad = deployment(2)
    bad["spec"]["replicas"] = "many"
    kube.cluster.put(DEPLOYMENTS, "default", "web", bad)
    res = actuator(kube, store).apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert res[0].outcome == "skipped"
    assert "spec.replicas='many', not an integer" in res[0].detail
    assert kube.cluster.writes() == []


def test_bounds_and_step_limits_are_rechecked_against_the_live_value(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(6))
    pol = policy(max_replicas=10, max_step_up=2)
    res = actuator(kube, store, [pol]).apply_plan(Plan(NOW, (scale(2, 30),)), NOW)
    assert res[0].outcome == "applied"
    assert "clamped 30 -> 10" in res[0].detail and "step limited to +2 from the live 6" in res[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 8


def test_a_plan_older_than_the_max_age_is_not_applied(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    res = actuator(kube, store, max_plan_age_s=30).apply_plan(Plan(NOW - 31, (scale(2, 4),)), NOW)
    assert res[0].outcome == "skipped" and "older than maxPlanAge 30 s" in res[0].detail
    assert kube.cluster.writes() == []


def test_the_kill_switch_pauses_all_actuation_without_writing(kube, store):
    from kubeemu import CONFIGMAPS

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(CONFIGMAPS, "default", "scaleahead-kill-switch", {"data": {"paused": "true"}})
    pols = [policy()]
    target = KubernetesTarget(kube.api_client(), pols)
    act = Actuator(target, store, pols, kill_switch=lambda: target.kill_switch("default"))
    res = act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert res[0].outcome == "skipped"
    assert "kill switch: ConfigMap default/scaleahead-kill-switch has paused=true" in res[0].detail
    assert kube.cluster.writes() == []
    kube.cluster.edit(CONFIGMAPS, "default", "scaleahead-kill-switch", {"data": {"paused": "false"}})
    assert act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)[0].outcome == "applied"
    settings_paused = actuator(kube, store, paused=True).apply_plan(Plan(NOW, (scale(4, 6),)), NOW)
    assert "paused" in settings_paused[0].detail


def test_a_crash_between_journal_and_api_call_is_reconciled_on_the_next_start(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    plan = Plan(NOW, (scale(2, 4), scale(2, 7, "api")))
    # The first process journals the plan, writes web, then dies before journaling the outcome,
    # and before touching api.
    _, ids = store.record_plan(plan, source="loop", state="planned")
    first = actuator(kube, store, [policy(), policy("api")])
    assert first._apply_one(scale(2, 4), NOW, NOW, False).outcome == "applied"  # intent, then the write
    # The next start reconciles.
    second = actuator(kube, store, [policy(), policy("api")])
    done = {aid: (state, why) for aid, state, why in second.reconcile(NOW + 60)}
    assert done[ids[0]][0] == "applied" and "shows the change" in done[ids[0]][1]
    assert done[ids[1]][0] == "skipped" and "not applied before the restart" in done[ids[1]][1]
    assert store.actions(state="planned") == []
    assert kube.cluster.writes()[-1][0] == "PATCH" and len(kube.cluster.writes()) == 1


@pytest.mark.parametrize("fault", [Fault("GET", "/deployments/web/scale", status=500, times=9), Fault(
    "GET", "/deployments/web/scale", html="<html>login</html>", times=9
)])  # fmt: skip
def test_an_action_whose_object_cannot_be_read_stays_planned_until_a_reconcile_can_read_it(kube, store, fault):
    """A 500 or a proxy's page says nothing about the write: closing the row as skipped (before
    2026-12-05) lost a confirmed write, and nothing looked at the row again."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4),)), source="loop", state="planned")[1]
    assert actuator(kube, store)._apply_one(scale(2, 4), NOW, NOW, False).outcome == "applied"  # then the crash
    kube.cluster.faults.append(fault)
    done = actuator(kube, store).reconcile(NOW + 60)
    assert [(i, state) for i, state, _ in done] == [(aid, "planned")]
    assert done[0][2].startswith("unresolved: cannot read the object (Deployment/default/web")
    assert "retried next cycle" not in done[0][2]
    assert [a.id for a in store.actions(state="planned")] == [aid]
    kube.cluster.faults.clear()  # the API server answers again
    done = actuator(kube, store).reconcile(NOW + 120)
    assert [(i, state) for i, state, _ in done] == [(aid, "applied")], done
    assert store.actions(state="planned") == []


def test_an_unresolved_action_superseded_by_a_later_applied_one_is_not_called_applied(kube, store):
    """While a row stays unresolved the leader goes on and writes the field again: the field's record
    and the live value are then the later action's, and said nothing about this row's write (before
    2026-12-05 evening it was closed 'applied', showing the later action's value)."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4),)), source="loop", state="planned")[1]
    assert actuator(kube, store)._apply_one(scale(2, 4), NOW, NOW, False).outcome == "applied"  # then the crash
    later = actuator(kube, store).apply_plan(Plan(NOW + 30, (scale(4, 6),)), NOW + 30)
    assert [r.outcome for r in later] == ["applied"]
    (later_id,) = [a.id for a in store.actions(state="applied")]
    done = actuator(kube, store).reconcile(NOW + 60)
    assert [(i, state) for i, state, _ in done] == [(aid, "skipped")], done
    assert f"superseded by action {later_id} (4 -> 6, applied)" in done[0][2]
    assert "Deployment/default/web shows spec.replicas=6 now" in done[0][2]
    assert store.actions(state="planned") == []


def test_an_unresolved_action_superseded_by_a_later_failed_write_is_not_called_applied(kube, store):
    """A later write journaled failed may have landed (its answer lost and the read after it failed
    too): its intent and the live value are that write's (found in review: the earlier row was
    closed applied on that write's value)."""
    from actuator.applying import intent_version

    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4),)), source="loop", state="planned")[1]  # never written
    (later_id,) = store.record_plan(Plan(NOW + 30, (scale(2, 6),)), source="loop", state="planned")[1]
    store.set_managed_field("Deployment/default/web", "spec.replicas", 2, intent_version(6, "7"), NOW + 30, original=2)
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(6))  # the later write landed
    store.set_action_state(later_id, "failed", "no answer from the API server (ReadTimeoutError)", NOW + 31)
    done = actuator(kube, store).reconcile(NOW + 60)
    assert [(i, state) for i, state, _ in done] == [(aid, "skipped")], done
    assert f"superseded by action {later_id} (2 -> 6, failed) on the same workload" in done[0][2]


def test_a_write_whose_answer_is_lost_but_that_landed_is_journaled_applied(kube, store):
    """A timeout says nothing about the write: the object is read again right away (until
    2026-12-05 evening such a write was journaled failed, "retried", and nothing corrected it)."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    # answered 3 s past the timeout (the emulator runs in this process: a stall could bring a late
    # answer within it); the read right after must answer within the 2 s
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", delay_s=5.0, after=True))
    (res,) = actuator(kube, store, timeout_s=2.0).apply_plan(Plan(NOW, (scale(2, 5),)), NOW)
    assert res.outcome == "applied", res
    assert "the write's answer was lost (Deployment/default/web: no answer from the API server" in res.detail
    assert "a read right after shows spec.replicas=5" in res.detail
    assert [a.state for a in store.actions()] == ["applied"]
    field = store.managed_field("Deployment/default/web")
    assert field is not None and field.value == 5 and not field.resource_version.startswith("intent:")


def test_a_write_whose_answer_is_lost_and_that_has_not_landed_when_read_again_stays_failed(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    # The server sits on the write past the client's timeout and drops it when the client hangs up
    # (aiohttp cancels the handler). Were that cancellation late, the write would land 5 s in: 3 s
    # after the timeout, well after the read right after it and the checks below.
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", delay_s=5.0))
    (res,) = actuator(kube, store, timeout_s=2.0).apply_plan(Plan(NOW, (scale(2, 5),)), NOW)
    assert res.outcome == "failed", res
    assert res.detail == "Deployment/default/web: no answer from the API server (ReadTimeoutError); retried next cycle"
    field = store.managed_field("Deployment/default/web")
    assert field is not None and field.resource_version.startswith("intent:5:")  # settled by the next read
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2


def test_a_reconcile_with_a_budget_stops_reading_when_it_runs_out_and_leaves_the_rest_planned(kube, store):
    """Each read of a hanging API server waits a request timeout: five rows held a retry (and the
    cycle after it) for five timeouts (found in review)."""
    for i in range(5):
        kube.cluster.put(DEPLOYMENTS, "default", f"w{i}", deployment(2))
        store.record_plan(Plan(NOW, (scale(2, 4, f"w{i}"),)), source="loop", state="planned")
    kube.cluster.faults.append(Fault("GET", "/scale", delay_s=4.0, times=100))  # 3.5 s past the timeout
    act = actuator(kube, store, [policy(f"w{i}") for i in range(5)], timeout_s=0.5)
    done = act.reconcile(NOW + 60, budget_s=0.8)
    assert [state for _, state, _ in done] == ["planned"] * 5
    reasons = [why for _, _, why in done]
    read = sum("cannot read the object" in r for r in reasons)
    # each read waits its 0.5 s timeout: the first is always made, a third never starts within 0.8 s
    assert read in (1, 2), reasons
    assert sum("not reached within this reconcile's 0.8 s" in r for r in reasons) == 5 - read, reasons
    assert len(store.actions(state="planned")) == 5


def test_a_reconcile_stops_when_this_replica_no_longer_holds_the_lease(kube, store):
    for i in range(3):
        kube.cluster.put(DEPLOYMENTS, "default", f"w{i}", deployment(2))
        store.record_plan(Plan(NOW, (scale(2, 4, f"w{i}"),)), source="loop", state="planned")
    act = actuator(kube, store, [policy(f"w{i}") for i in range(3)])
    answers = iter([True, False, False])
    act.is_leader = lambda now: next(answers)
    done = act.reconcile(NOW + 60)
    assert [state for _, state, _ in done] == ["skipped", "planned", "planned"], done
    assert all("no longer holds the lease" in why for _, _, why in done[1:])
    assert len(store.actions(state="planned")) == 2


def test_an_action_on_an_object_that_is_gone_is_still_closed(kube, store):
    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4, "gone"),)), source="loop", state="planned")[1]
    done = actuator(kube, store, [policy("gone")]).reconcile(NOW + 60)
    assert [(i, state) for i, state, _ in done] == [(aid, "skipped")], done
    assert store.actions(state="planned") == []


def test_reconcile_does_not_count_someone_elses_equal_value_as_applied(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4),)), source="loop", state="planned")[1]
    # The process died before its write; meanwhile someone ran `kubectl scale --replicas=4`.
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 4}})
    done = {i: (state, why) for i, state, why in actuator(kube, store).reconcile(NOW + 60)}
    assert done[aid][0] == "skipped", done[aid][1]
    assert "recorded no write of it before the restart" in done[aid][1]
    assert store.managed_field("Deployment/default/web") is None  # not taken as scaleahead's value


def test_reconciling_keeps_to_its_own_actions_and_leaves_what_another_process_journaled(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    _, ids = store.record_plan(Plan(NOW, (scale(2, 4), scale(2, 7, "api"))), source="loop", state="planned")
    act = actuator(kube, store, [policy(), policy("api")])
    # Another shard's action (api) is not this process's to reconcile.
    done = act.reconcile(NOW + 60, owns=lambda row: row.target == "Deployment/default/web")
    assert [aid for aid, _, _ in done] == [ids[0]]
    assert [a.id for a in store.actions(state="planned")] == [ids[1]]
    # The leader journals it meanwhile: a reconciling process does not overwrite that.
    store.set_action_state(ids[1], "applied", "applied by the leader", NOW + 61)
    assert not store.set_action_state(ids[1], "skipped", "late", NOW + 62, only_from="planned")
    assert store.actions(target="Deployment/default/api")[0].state == "applied"


def test_a_human_edit_is_detected_respected_for_the_hold_time_reported_and_then_managed_again(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store, human_edit_hold_s=600)
    assert act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)[0].outcome == "applied"
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 9}})  # kubectl scale
    writes = len(kube.cluster.writes())
    later = act.apply_plan(Plan(NOW + 60, (scale(4, 5),)), NOW + 60)
    assert later[0].outcome == "skipped"
    assert "human edit: Deployment/default/web spec.replicas was set to 9" in later[0].detail
    assert "scaleahead had set 4" in later[0].detail
    still = act.apply_plan(Plan(NOW + 500, (scale(9, 5),)), NOW + 500)
    assert still[0].outcome == "skipped" and "human edit" in still[0].detail
    assert len(kube.cluster.writes()) == writes
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 9
    after = act.apply_plan(Plan(NOW + 700, (scale(9, 5),)), NOW + 700)
    assert after[0].outcome == "applied"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 5


def test_a_status_change_by_a_controller_is_not_taken_for_a_human_edit(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store)
    act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"status": {"readyReplicas": 4}})
    assert act.apply_plan(Plan(NOW + 10, (scale(4, 6),)), NOW + 10)[0].outcome == "applied"


def test_a_write_that_timed_out_but_landed_is_not_mistaken_for_a_human_edit(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store, timeout_s=2.0)  # the reads and writes that must answer do, on a slow machine
    # The change lands, but its answer comes 3 s after the client's timeout.
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", delay_s=5.0, after=True))
    # ... and the read right after it fails too: only the write-ahead intent knows it was ours.
    kube.cluster.faults.append(Fault("GET", "/deployments/web/scale", status=500, skip=1))
    assert act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)[0].outcome == "failed"
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 4
    nxt = act.apply_plan(Plan(NOW + 10, (scale(4, 6),)), NOW + 10)
    assert nxt[0].outcome == "applied", nxt
    # ... and a real edit after that is still detected.
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 1}})
    held = act.apply_plan(Plan(NOW + 20, (scale(1, 6),)), NOW + 20)
    assert held[0].outcome == "skipped" and "human edit" in held[0].detail


def test_a_human_edit_that_causes_a_409_is_respected_not_overwritten_on_the_retry(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store, human_edit_hold_s=600)
    assert act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)[0].outcome == "applied"
    real_write = act.target.write
    edits: list[int] = []

    def racing_write(action, value, live):  # kubectl scale --replicas=1 lands between our GET and PATCH
        if not edits:
            edits.append(1)
            kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 1}})
        return real_write(action, value, live)

    act.target.write = racing_write
    result = act.apply_plan(Plan(NOW + 10, (scale(4, 8),)), NOW + 10)[0]
    assert result.outcome == "skipped" and "was set to 1 by someone else (scaleahead had set 4)" in result.detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 1


def test_a_human_edit_after_a_failed_write_is_respected(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store, human_edit_hold_s=600)
    assert act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)[0].outcome == "applied"
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=500))
    assert act.apply_plan(Plan(NOW + 10, (scale(4, 8),)), NOW + 10)[0].outcome == "failed"
    kube.cluster.edit(DEPLOYMENTS, "default", "web", {"spec": {"replicas": 1}})  # kubectl scale
    held = act.apply_plan(Plan(NOW + 20, (scale(4, 8),)), NOW + 20)[0]
    assert held.outcome == "skipped" and "was set to 1 by someone else" in held.detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 1
    # without an edit, a write that failed is simply made again
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    act = actuator(kube, store, [policy(), policy("api")], human_edit_hold_s=600)
    assert act.apply_plan(Plan(NOW, (scale(2, 4, "api"),)), NOW)[0].outcome == "applied"
    kube.cluster.faults.append(Fault("PATCH", "/deployments/api/scale", status=500))
    assert act.apply_plan(Plan(NOW + 10, (scale(4, 8, "api"),)), NOW + 10)[0].outcome == "failed"
    assert act.apply_plan(Plan(NOW + 20, (scale(4, 8, "api"),)), NOW + 20)[0].outcome == "applied"


def test_reconcile_counts_a_write_the_step_limit_reduced_as_applied(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    pols = [policy(max_step_up=2)]
    action = scale(2, 10)
    (aid,) = store.record_plan(Plan(NOW, (action,)), source="loop", state="planned")[1]
    res = actuator(kube, store, pols)._apply_one(action, NOW, NOW, False)  # written, then the process dies
    assert res.outcome == "applied" and kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 4
    done = {i: (state, why) for i, state, why in actuator(kube, store, pols).reconcile(NOW + 60)}
    assert done[aid][0] == "applied" and "spec.replicas=4" in done[aid][1]


def test_actions_of_a_workload_held_back_are_skipped_without_a_call(kube, store):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    act = actuator(kube, store)
    act.held = frozenset({"Deployment/default/web"})  # the daemon's workloads backing off
    (res,) = act.apply_plan(Plan(NOW, (scale(2, 4),)), NOW)
    assert res.outcome == "skipped" and res.detail == "backing off after errors"
    assert kube.cluster.writes() == []
    act.held = frozenset()
    assert act.apply_plan(Plan(NOW + 10, (scale(2, 4),)), NOW + 10)[0].outcome == "applied"


def test_run_s_reconcile_logs_the_rows_it_did_not_reach_in_one_line(kube, store, caplog):
    """``scaleahead run``'s reconcile on a large journal: the rows its budget did not reach are one
    warning (count, first ids), not one per row (until 2026-12-06 10,000 such rows logged ~9,600
    warnings every retry); a row whose object cannot be read keeps its own line."""
    import logging

    from scaleahead.commands.run import _reconciler

    for i in range(12):
        kube.cluster.put(DEPLOYMENTS, "default", f"w{i}", deployment(2))
        store.record_plan(Plan(NOW, (scale(2, 4, f"w{i}"),)), source="loop", state="planned")
    kube.cluster.faults.append(Fault("GET", "/deployments/w11/scale", status=500, times=1))  # read first
    act = actuator(kube, store, [policy(f"w{i}") for i in range(12)])
    with caplog.at_level(logging.INFO, logger="scaleahead"):
        left = _reconciler(act, None, retry_s=60.0, budget_s=0.0)(NOW + 60)  # budget 0: one row is read
    assert left == 12
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("journal: action 12 stays planned: unresolved: cannot read the object")
    assert warnings[1] == (
        "journal: 11 action(s) stay planned (ids 11, 10, 9, 8, 7, ...): unresolved: not reached within this "
        "reconcile's 0 s (slow reads); tried again; reconciled again in 60 s while this replica leads, or by "
        "`scaleahead actuator reconcile`"
    )
    assert [getattr(r, "actions", None) for r in caplog.records if r.levelno == logging.WARNING] == [None, 11]
    assert len(store.actions(state="planned")) == 12


class _Dies:
    """A target whose process dies (Ctrl-C, an OOM kill) at its first read."""

    def live(self, action):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt


def test_a_dry_run_that_dies_midway_leaves_no_planned_row_for_a_reconcile(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A dry run's rows are journaled `dry-run` from the start: a `planned` row would be read at the
    next start as a write that may have landed (untested until the mutation audit of 2026-12-06)."""
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    try:
        act = Actuator(_Dies(), store, [policy()], SafetyConfig())  # type: ignore[arg-type]
        plan = Plan(NOW, (ScaleTo(WorkloadRef("Deployment", "default", "web"), 2, 6, Reason("t", "t")),))
        with pytest.raises(KeyboardInterrupt):
            act.apply_plan(plan, NOW, dry_run=True)
        assert store.actions(state="planned") == []
        assert {a.state for a in store.actions()} == {"dry-run"}
    finally:
        store.close()


def test_of_two_rows_left_planned_on_one_object_the_older_is_superseded_by_the_newer(kube, store):
    """Both rows of one object left planned, the newer one's write landed: reconciliation settles
    the newer first (applied) and the older sees it, although the states are written in batches."""
    from actuator.applying import intent_version

    (aid,) = store.record_plan(Plan(NOW, (scale(2, 4),)), source="loop", state="planned")[1]  # never written
    (later_id,) = store.record_plan(Plan(NOW + 30, (scale(2, 6),)), source="loop", state="planned")[1]
    store.set_managed_field("Deployment/default/web", "spec.replicas", 2, intent_version(6, "7"), NOW + 30, original=2)
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(6))  # the later write landed, then the crash
    done = actuator(kube, store).reconcile(NOW + 60)
    assert [(i, state) for i, state, _ in done] == [(later_id, "applied"), (aid, "skipped")], done
    assert f"superseded by action {later_id} (2 -> 6, applied)" in done[1][2]
    assert {a.id: a.state for a in store.actions()} == {later_id: "applied", aid: "skipped"}


def test_reconcile_settles_its_rows_a_few_hundred_to_a_transaction(kube, store):
    """450 rows left planned are settled in a handful of writing transactions (until 2026-12-06
    one a row), each row's outcome as before."""
    from sqlalchemy import event

    names = [f"w{i}" for i in range(450)]
    for name in names:
        kube.cluster.put(DEPLOYMENTS, "default", name, deployment(2))
    ids = store.record_plan(Plan(NOW, tuple(scale(2, 3, n) for n in names)), source="loop", state="planned")[1]
    wrote, writing = [False], [0]

    def statement(_conn, _cursor, sql, *_rest) -> None:  # type: ignore[no-untyped-def]
        wrote[0] = wrote[0] or sql.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))

    def commit(_conn) -> None:  # type: ignore[no-untyped-def]
        writing[0] += wrote[0]
        wrote[0] = False

    event.listen(store.engine, "before_cursor_execute", statement)
    event.listen(store.engine, "commit", commit)
    done = actuator(kube, store, [policy(n) for n in names]).reconcile(NOW + 60)
    event.remove(store.engine, "before_cursor_execute", statement)
    event.remove(store.engine, "commit", commit)
    assert sorted(i for i, _, _ in done) == sorted(ids)
    assert {state for _, state, _ in done} == {"skipped"}
    assert all("not applied before the restart (spec.replicas=2)" in why for _, _, why in done)
    assert store.actions(state="planned") == [] and len(store.actions(state="skipped")) == 450
    assert writing[0] == 3, writing[0]  # 200 + 200 + 50


def test_reconcile_reads_each_rows_field_record_when_it_decides_the_row(kube, store):
    """Another process (``actuator reconcile`` and ``plan --apply`` run without the Lease) writes the
    object again while earlier rows are read: the older row sees that write's record and is
    superseded, not closed applied on it (an audit found a record read 200 rows ahead stale)."""
    from actuator.applying import intent_version

    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    (x,) = store.record_plan(Plan(NOW, (scale(2, 5),)), source="loop", state="planned")[1]
    # its intent, stamped with its journal time; its write never landed
    store.set_managed_field("Deployment/default/web", "spec.replicas", 2, intent_version(5, "1"), NOW, original=2)
    store.record_plan(Plan(NOW + 2, (scale(2, 3, "api"),)), source="loop", state="planned")  # read first
    act = actuator(kube, store, [policy(), policy("api")])
    real_live, other = act.target.live, []

    def live(action, quota_room=True):  # type: ignore[no-untyped-def]
        if action.workload.name == "api" and not other:  # meanwhile, another process writes web
            (z,) = store.record_plan(Plan(NOW + 40, (scale(2, 5),)), source="cli", state="planned")[1]
            store.set_managed_field("Deployment/default/web", "spec.replicas", 2, intent_version(5, "2"), NOW + 50)
            kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(5))
            store.set_action_state(z, "applied", "applied", NOW + 51)
            other.append(z)
        return real_live(action, quota_room)

    act.target.live = live  # type: ignore[method-assign]
    done = {aid: (state, why) for aid, state, why in act.reconcile(NOW + 60)}
    assert done[x][0] == "skipped" and f"superseded by action {other[0]}" in done[x][1], done


def test_a_failed_state_write_does_not_hide_the_error_that_stopped_the_reconcile(kube, store, monkeypatch):
    """The states decided before an error are written on the way out; if that fails too, the
    error raised is the first one (an audit found the database's error raised in its place)."""
    for i in range(3):
        kube.cluster.put(DEPLOYMENTS, "default", f"w{i}", deployment(2))
        store.record_plan(Plan(NOW, (scale(2, 4, f"w{i}"),)), source="loop", state="planned")
    act = actuator(kube, store, [policy(f"w{i}") for i in range(3)])
    real_live, seen = act.target.live, []

    def live(action, quota_room=True):  # type: ignore[no-untyped-def]
        seen.append(action)
        if len(seen) == 2:
            raise RuntimeError("the client broke")
        return real_live(action, quota_room)

    def broken(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise OSError("the database is gone")

    act.target.live = live  # type: ignore[method-assign]
    monkeypatch.setattr(store, "set_action_states_from", broken)
    with pytest.raises(RuntimeError, match="the client broke"):
        act.reconcile(NOW + 60)
    assert len(store.actions(state="planned")) == 3  # nothing written: reconciled again next time
