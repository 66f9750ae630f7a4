"""One status publish makes at most ``max_writes`` PATCH calls (the rest follow at the next ones, a
new object or a changed reason first), and the minute refresh of statuses written together is
spread over the following publishes instead of rewriting them all in one.

Until 2026-12-06 ``publish`` made one PATCH per changed status, on the loop's thread: 10,000
policies whose desired replicas all moved in a cycle (a daily ramp) made 10,000 PATCH calls, 10 s
of client CPU alone before the API server's latency (439 s against the emulator), and statuses
written in the same cycle were all rewritten together every ``refresh_s`` (found by the scale audit,
F3)."""

from __future__ import annotations

import kmock

from actuator.policy_resources import GROUP, PLURAL, VERSION, PolicyStatusWriter
from scaleahead.daemon import PolicyStatus

POLICIES = kmock.resource(GROUP, VERSION, PLURAL)


def _declare(kube, n: int) -> None:
    kube.cluster.resources[POLICIES] = kmock.ResourceInfo(
        namespaced=True, kind="PredictiveScalingPolicy", subresources=["status"]
    )
    for i in range(n):
        kube.cluster.put(POLICIES, "shop", f"p{i}", {"spec": {"target": {"name": f"w{i}"}}})


def _statuses(n: int, t: float, desired: int, code: dict[int, str] | None = None) -> list[PolicyStatus]:
    code = code or {}
    return [
        PolicyStatus(
            f"p{i}",
            "shop",
            f"Deployment/shop/w{i}",
            desired,
            2,
            12.5,
            "none",
            f"{code.get(i, 'forecast')} text",
            code.get(i, "forecast"),
            t,
            "seasonal_naive",
        )  # fmt: skip
        for i in range(n)
    ]


def _patched(kube) -> list[str]:
    """The policy names whose status was PATCHed, in order."""
    return [p.split("/")[-2] for m, p in kube.cluster.writes() if m == "PATCH" and p.endswith("/status")]


def _status(kube, i: int) -> dict:
    return kube.cluster.get(POLICIES, "shop", f"p{i}").get("status", {})


def test_one_publish_writes_at_most_max_writes_the_rest_follow_a_changed_reason_first(kube) -> None:
    n = 250
    _declare(kube, n)
    writer = PolicyStatusWriter(kube.api_client(), refresh_s=60.0)
    per_publish = []
    for t in (1000.0, 1010.0, 1020.0):  # every object new: 100, 100, then the last 50
        before = len(_patched(kube))
        writer.publish(_statuses(n, t, 3))
        per_publish.append(len(_patched(kube)) - before)
    assert per_publish == [100, 100, 50], per_publish
    assert writer.max_writes == 100, "the default"
    assert writer.deferred == 0
    assert all(_status(kube, i)["desiredReplicas"] == 3 for i in range(n)), "every object written in 3 publishes"

    # every desired count moves (a daily ramp), and five objects' reason changes too: those go first
    before = len(_patched(kube))
    held = {7: "human_edit", 77: "human_edit", 140: "co_writer", 201: "paused", 249: "backing_off"}
    writer.publish(_statuses(n, 1030.0, 4, held))
    first = _patched(kube)[before:]
    assert len(first) == 100 and writer.deferred == 150
    assert [f"p{i}" for i in held] == first[:5], first[:8]
    assert _status(kube, 140)["lastReasonCode"] == "co_writer"
    # the desired counts move again (5): the 150 left waiting go first, each written once, with its
    # newest status (never the stale 4 of the publish that left it); then the 100 written with 4
    later = []
    for t in (1040.0, 1050.0, 1060.0):
        mark = len(_patched(kube))
        writer.publish(_statuses(n, t, 5, held))
        later.append(_patched(kube)[mark:])
    assert [len(names) for names in later] == [100, 100, 50]
    waited = {f"p{i}" for i in range(n)} - set(first)
    assert set(later[0]) | set(later[1][:50]) == waited
    assert writer.deferred == 0
    assert all(_status(kube, i)["desiredReplicas"] == 5 for i in range(n))


def test_objects_written_together_are_not_all_refreshed_in_one_publish(kube) -> None:
    n = 60
    _declare(kube, n)
    writer = PolicyStatusWriter(kube.api_client(), refresh_s=60.0)
    writer.publish(_statuses(n, 1000.0, 3))  # all 60 written in one publish (under the budget)
    assert len(_patched(kube)) == n
    counts = []
    refreshed_by: dict[str, float] = {}
    for step in range(1, 25):  # nothing changes, a publish every 10 s for 4 minutes
        t = 1000.0 + 10 * step
        before = len(_patched(kube))
        writer.publish(_statuses(n, t, 3))
        names = _patched(kube)[before:]
        counts.append(len(names))
        for name in names:
            refreshed_by.setdefault(name, t)
    # 60 objects over a 60 s refresh at 10 s publishes: about 10 a publish, never all 60 at once
    assert max(counts) <= 11, counts
    assert len(refreshed_by) == n, "every status is refreshed"
    assert max(refreshed_by.values()) <= 1000.0 + 60 + 60, refreshed_by
    assert sum(counts[-12:]) >= n, "once spread, each is refreshed about every refresh_s"
    assert min(counts[-12:]) >= 1 and max(counts[-12:]) <= 11, counts


def test_objects_whose_writes_keep_failing_do_not_starve_the_others() -> None:
    """Found by a review: an object whose write failed was never written, so it stayed first ("never
    written") at every publish; 100 of them took the whole budget every time and another object's
    change was never written. They now come after every other write."""
    from kubernetes.client import ApiClient
    from kubernetes.client.rest import ApiException

    from scaleahead.daemon import PolicyStatus

    class Custom:
        def __init__(self) -> None:
            self.ok: list[tuple[str, object]] = []

        def patch_namespaced_custom_object_status(self, group, version, ns, plural, name, body):  # type: ignore[no-untyped-def]
            if name.startswith("bad"):
                raise ApiException(status=422, reason="Unprocessable Entity")
            self.ok.append((name, body["status"].get("desiredReplicas")))

    def st(name: str, desired: int, t: float) -> PolicyStatus:
        return PolicyStatus(
            name, "shop", f"Deployment/shop/{name}", desired, 2, 12.5, "none", "why", "forecast", t, "seasonal_naive"
        )

    w = PolicyStatusWriter(ApiClient(), refresh_s=60.0, max_writes=100)
    fake = w.custom = Custom()  # type: ignore[assignment]
    bad = [f"bad{i}" for i in range(100)]
    w.publish([st("good", 3, 0.0)] + [st(b, 3, 0.0) for b in bad])
    w.publish([st("good", 8, 10.0)] + [st(b, 3, 10.0) for b in bad])
    assert ("good", 8) in fake.ok
