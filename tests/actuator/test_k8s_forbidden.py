"""A 403 is told by the API server's message: RBAC, a full ResourceQuota, a namespace being deleted,
an admission policy (Gatekeeper, Kyverno, a ValidatingAdmissionPolicy), another refusal. The
emulator answers with the messages a real API server sends (``Fault(..., message=...)``).

Until 2026-12-06 every 403 read "RBAC forbids ... Grant it to scaleahead's service account", and
the API server's message was dropped (found by the co-existence audit)."""

from __future__ import annotations

from kubeemu import DEPLOYMENTS, PODS, Fault, deployment, policy
from kubernetes.client.exceptions import ApiException

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget, _error
from actuator.safety import SafetyConfig
from scaleahead.types import MovePod, Plan, Reason, ScaleTo, WorkloadRef

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
SA = "system:serviceaccount:scaleahead-system:scaleahead"
RBAC_PATCH = (
    f'deployments.apps "web" is forbidden: User "{SA}" cannot patch resource "deployments/scale" '
    'in API group "apps" in the namespace "default"'
)
RBAC_GET = (
    f'deployments.apps "web" is forbidden: User "{SA}" cannot get resource "deployments" '
    'in API group "apps" in the namespace "default"'
)
QUOTA = 'pods "p1-moved" is forbidden: exceeded quota: pods-quota, requested: pods=1, used: pods=10, limited: pods=10'
UNSET = 'pods "p1-moved" is forbidden: failed quota: compute: must specify limits.cpu for: c; requests.cpu for: c'
TERMINATING = (
    'pods "p1-moved" is forbidden: unable to create new content in namespace default because it is being terminated'
)
GATEKEEPER = (
    'admission webhook "validation.gatekeeper.sh" denied the request: [must-have-owner] label owner is required'
)
VAP = (
    "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding "
    "'max-replicas-binding' denied request: replicas must be at most 4"
)
POD_SECURITY = 'pods "p1-moved" is forbidden: violates PodSecurity "restricted:latest": privileged'


def _actuator(kube, policies=()) -> Actuator:
    pols = list(policies)
    return Actuator(KubernetesTarget(kube.api_client(), pols, timeout_s=2.0), None, pols, SafetyConfig())


def _scale(kube, message: str):
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.faults.append(Fault("PATCH", "/deployments/web/scale", status=403, message=message))
    action = ScaleTo(WorkloadRef("Deployment", "default", "web"), 2, 4, R)
    return _actuator(kube, [policy("web")]).apply_plan(Plan(NOW, (action,)), NOW)[0]


def _move_bare_pod(kube, message: str):
    """A bare pod's move: its copy (POST pods) is refused with ``message``; nothing is evicted."""
    kube.cluster.put(
        PODS,
        "default",
        "p1",
        {
            "metadata": {"labels": {"app": "x"}, "uid": "u1"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        },
    )
    kube.cluster.faults.append(Fault("POST", "/namespaces/default/pods", status=403, message=message))
    res = _actuator(kube).apply_plan(Plan(NOW, (MovePod("default", "p1", "n1", "n2", R, pod_uid="u1"),)), NOW)[0]
    assert kube.cluster.get(PODS, "default", "p1") is not None  # the copy failed: the pod was not evicted
    return res


def test_an_rbac_refusal_says_rbac_forbids_and_quotes_the_api_servers_message(kube):
    res = _scale(kube, RBAC_PATCH)
    assert res.outcome == "failed"
    assert "RBAC forbids 'patch' on deployments/scale in namespace default for Deployment/default/web" in res.detail
    assert f"(403: '{RBAC_PATCH}')" in res.detail and "Grant it to scaleahead's service account" in res.detail


def test_a_403_without_a_message_is_taken_for_rbac(kube):
    err = _error(
        ApiException(status=403, reason="Forbidden"), "Deployment/default/web", "patch", "deployments/scale", "default"
    )
    assert err.outcome == "failed" and err.status == 403
    assert err.message.startswith("RBAC forbids 'patch' on deployments/scale in namespace default")
    assert "(403)." in err.message


def test_a_full_quota_is_skipped_naming_the_quota_not_rbac(kube):
    """As when the quota check before a write finds no room (actuator/safety.py): skipped, retried."""
    res = _move_bare_pod(kube, QUOTA)
    assert res.outcome == "skipped"
    assert "RBAC" not in res.detail and "Grant" not in res.detail
    assert "ResourceQuota default/pods-quota is full" in res.detail
    assert "once the quota has room" in res.detail and f"(403: '{QUOTA}')" in res.detail


def test_a_quota_refusing_pods_without_requests_says_to_set_them(kube):
    res = _move_bare_pod(kube, UNSET)
    assert res.outcome == "skipped" and "RBAC" not in res.detail
    assert "ResourceQuota default/compute refuses pods whose containers do not set" in res.detail
    assert "LimitRange default" in res.detail and "must specify limits.cpu" in res.detail


def test_a_namespace_being_deleted_is_named_not_rbac(kube):
    res = _move_bare_pod(kube, TERMINATING)
    assert res.outcome == "failed"
    assert "RBAC" not in res.detail and "Grant" not in res.detail
    assert "namespace default is being deleted" in res.detail and "because it is being terminated" in res.detail


def test_an_admission_webhooks_denial_is_quoted_with_what_to_change(kube):
    res = _scale(kube, GATEKEEPER)
    assert res.outcome == "failed"
    assert "RBAC" not in res.detail and "Grant" not in res.detail
    assert "an admission policy (validation.gatekeeper.sh) refused 'patch' on deployments/scale" in res.detail
    assert "label owner is required" in res.detail
    assert "policy engine's rule" in res.detail and "scaleahead policy" in res.detail


def test_a_validating_admission_policys_denial_is_quoted_with_what_to_change(kube):
    res = _scale(kube, VAP)
    assert res.outcome == "failed" and "RBAC" not in res.detail
    assert "an admission policy (max-replicas) refused" in res.detail and "at most 4" in res.detail


def test_another_refusal_is_quoted_and_not_called_rbac(kube):
    res = _move_bare_pod(kube, POD_SECURITY)
    assert res.outcome == "failed"
    assert "RBAC forbids" not in res.detail and "not an RBAC refusal" in res.detail
    assert 'violates PodSecurity "restricted:latest"' in res.detail


def test_a_long_multi_line_message_is_quoted_on_one_line_and_cut(kube):
    res = _scale(kube, GATEKEEPER + "\n\n  details:\n" + "x " * 400)
    assert "\n" not in res.detail and "label owner is required details: x x" in res.detail
    assert "x...')" in res.detail and len(res.detail) < 700


def test_an_unreadable_workload_quotes_the_api_servers_message(kube):
    """The read behind ``state_unreadable``: an RBAC refusal says so and quotes it; another 403
    (here an authorization webhook's own words) is quoted, not called RBAC."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(DEPLOYMENTS, "default", "api", deployment(2))
    kube.cluster.faults.append(Fault("GET", "/deployments/web", status=403, message=RBAC_GET, times=10))
    other = "access to namespace default is blocked by the tenancy guard"
    kube.cluster.faults.append(Fault("GET", "/deployments/api", status=403, message=other, times=10))
    web, api = WorkloadRef("Deployment", "default", "web"), WorkloadRef("Deployment", "default", "api")
    state = KubernetesTarget(kube.api_client(), [], timeout_s=2.0).read_state([web, api])
    assert set(state.unreadable) == {web, api}
    assert state.unreadable[web].startswith("RBAC forbids 'get' on deployments in namespace default")
    assert f"(403: '{RBAC_GET}')" in state.unreadable[web]
    assert "RBAC forbids" not in state.unreadable[api] and f"(403: '{other}')" in state.unreadable[api]
    assert "refused 'get' on deployments" in state.unreadable[api]
