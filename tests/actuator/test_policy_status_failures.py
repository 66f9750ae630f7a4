"""A policy status write that fails is one line (HTTP status, the API server's message, event
``status_failed``), once per object and reason; an object that answers 404 (gone) is not written
again while it keeps being published, and is written once it is published anew.

Until 2026-12-06 every failed write logged the client's multi-line exception (HTTP headers and
body), at every publish, for every such policy (found by the co-existence audit)."""

from __future__ import annotations

import logging

import kmock
from kubeemu import Fault

from actuator.policy_resources import GROUP, PLURAL, VERSION, PolicyStatusWriter, Rejected

POLICIES = kmock.resource(GROUP, VERSION, PLURAL)
RBAC = (
    'predictivescalingpolicies.scaleahead.io "web" is forbidden: User "system:serviceaccount:scaleahead-system:'
    'scaleahead" cannot patch resource "predictivescalingpolicies/status" in API group "scaleahead.io" in the '
    'namespace "shop"'
)


def _declare(kube, *names: str) -> None:
    kube.cluster.resources[POLICIES] = kmock.ResourceInfo(
        namespaced=True, kind="PredictiveScalingPolicy", subresources=["status"]
    )
    for name in names:
        kube.cluster.put(POLICIES, "shop", name, {"spec": {"target": {"name": name}}})


def _rejected(name: str) -> Rejected:
    return Rejected(name, "shop", "DuplicateTarget", f"{name} duplicates a target")


def _patches(kube, name: str) -> int:
    return sum(1 for m, p in kube.cluster.writes() if m == "PATCH" and p.endswith(f"/{PLURAL}/{name}/status"))


def _warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == "status_failed"]


def test_a_gone_object_is_one_line_once_and_not_written_while_it_keeps_being_published(kube, caplog) -> None:
    _declare(kube, "web")
    writer = PolicyStatusWriter(kube.api_client(), refresh_s=60.0)
    caplog.set_level(logging.WARNING, logger="scaleahead.actuator.policies")
    for t in (1000.0, 1010.0, 1020.0, 1030.0):  # "gone" deleted; still published until the next reload
        writer.publish_rejected([_rejected("gone"), _rejected("web")], now=t)
    assert _patches(kube, "gone") == 1, "tried once: it answered 404"
    warned = _warnings(caplog)
    assert len(warned) == 1, [r.getMessage() for r in warned]
    line = warned[0].getMessage()
    assert "\n" not in line and "HTTPHeaderDict" not in line and "HTTP response" not in line
    assert line.startswith("status of shop/gone not written (HTTP 404: '")
    assert "the object is gone" in line and "published anew" in line
    assert kube.cluster.get(POLICIES, "shop", "web")["status"]["conditions"][0]["reason"] == "DuplicateTarget"


def test_a_gone_object_published_anew_is_written_again(kube, caplog) -> None:
    """Its policy left the daemon's list at a reload (not published for longer than refresh_s) and
    came back (re-created): written. One never left out is tried again once an hour."""
    _declare(kube)
    writer = PolicyStatusWriter(kube.api_client(), refresh_s=60.0)
    writer.publish_rejected([_rejected("web")], now=1000.0)  # 404: gone
    writer.publish_rejected([_rejected("web")], now=1030.0)
    assert _patches(kube, "web") == 1
    kube.cluster.put(POLICIES, "shop", "web", {"spec": {"target": {"name": "web"}}})  # re-created
    writer.publish_rejected([_rejected("web")], now=1200.0)  # published again after 170 s away
    assert _patches(kube, "web") == 2
    assert kube.cluster.get(POLICIES, "shop", "web")["status"]["conditions"][0]["reason"] == "DuplicateTarget"
    assert writer.writes == 1

    kube.cluster.put(POLICIES, "shop", "api", {"spec": {"target": {"name": "api"}}})
    kube.cluster.faults.append(Fault("PATCH", "/api/status", status=404))  # deleted and re-created at once
    for t in range(2000, 2000 + 3600 + 30, 30):  # published every 30 s: never left out
        writer.publish_rejected([_rejected("api")], now=float(t))
    assert _patches(kube, "api") == 2, "tried at 404, then once an hour later"
    assert kube.cluster.get(POLICIES, "shop", "api")["status"]["conditions"][0]["reason"] == "DuplicateTarget"


def test_another_failure_warns_once_per_reason_and_again_after_a_success(kube, caplog) -> None:
    _declare(kube, "web")
    writer = PolicyStatusWriter(kube.api_client(), refresh_s=60.0)
    caplog.set_level(logging.WARNING, logger="scaleahead.actuator.policies")
    kube.cluster.faults.append(Fault("PATCH", "/web/status", status=403, message=RBAC, times=3))
    for t in (1000.0, 1010.0, 1020.0):
        writer.publish_rejected([_rejected("web")], now=t)
    assert _patches(kube, "web") == 3, "a 403 is tried again at every publish"
    warned = _warnings(caplog)
    assert len(warned) == 1
    line = warned[0].getMessage()
    assert line.startswith(f"status of shop/web not written (HTTP 403: '{RBAC}')") and "\n" not in line
    assert "predictivescalingpolicies/status" in line and "deploy/base/rbac.yaml" in line
    kube.cluster.faults.append(Fault("PATCH", "/web/status", status=500, message="etcdserver: leader changed"))
    writer.publish_rejected([_rejected("web")], now=1030.0)
    assert len(_warnings(caplog)) == 2, "another reason: warned"
    assert "(HTTP 500: 'etcdserver: leader changed'): tried again" in _warnings(caplog)[1].getMessage()
    writer.publish_rejected([_rejected("web")], now=1040.0)  # written
    assert writer.writes == 1
    kube.cluster.faults.append(Fault("PATCH", "/web/status", status=500, message="etcdserver: leader changed"))
    writer.publish_rejected([_rejected("web")], now=1200.0)  # refreshed: fails again after a success
    assert len(_warnings(caplog)) == 3, "warned again: it succeeded in between"
