"""LimitRange defaults in the quota room (``actuator.limit_ranges``): a pod template without requests
in a namespace whose LimitRange gives defaults is charged the defaults by the API server, so the
quota check and the planner's pools count it so. Unit cases, then through the official client
against the emulated API server."""

from __future__ import annotations

from kubeemu import DEPLOYMENTS, LIMITRANGES, QUOTAS, RUNTIMECLASSES, Fault, deployment, policy

from actuator.applying import Actuator
from actuator.kubernetes import KubernetesTarget, _rooms, pod_shape
from actuator.limit_ranges import container_defaults, with_defaults
from actuator.safety import SafetyConfig
from scaleahead.types import Plan, Reason, ScaleTo, WorkloadRef

R = Reason("test", "because the test says so")
NOW = 1_000_000.0
WEB = WorkloadRef("Deployment", "default", "web")


def _limit_range(**item: dict[str, str]) -> dict:
    return {"spec": {"limits": [{"type": "Container", **item}, {"type": "Pod", "max": {"cpu": "64"}}]}}


def test_the_limit_ranges_own_defaulting_default_from_max_request_from_default_then_min() -> None:
    assert container_defaults([_limit_range(max={"cpu": "2"}, min={"memory": "64Mi"})]) == [
        ({"cpu": "2"}, {"memory": "64Mi", "cpu": "2"})
    ]
    assert container_defaults([_limit_range(default={"cpu": "1"}, defaultRequest={"cpu": "250m"})]) == [
        ({"cpu": "1"}, {"cpu": "250m"})
    ]
    assert container_defaults([{"spec": {"limits": [{"type": "Pod", "max": {"cpu": "4"}}]}}]) == []


def test_defaults_fill_only_what_a_container_left_out_after_the_request_defaults_to_its_limit() -> None:
    defaults = container_defaults(
        [_limit_range(default={"cpu": "1", "memory": "512Mi"}, defaultRequest={"cpu": "250m", "memory": "256Mi"})]
    )
    template = {
        "spec": {
            "containers": [
                {"name": "bare"},  # both defaults
                {"name": "capped", "resources": {"limits": {"cpu": "2"}}},  # its CPU request is its limit
                {"name": "asks", "resources": {"requests": {"memory": "128Mi"}}},
            ],
            "initContainers": [{"name": "init"}],
        }
    }
    assert pod_shape(with_defaults(template, defaults)) == {
        "requests.cpu": 250 + 2000 + 250,
        "requests.memory": 256 + 256 + 128,
        "limits.cpu": 1000 + 2000 + 1000,
        "limits.memory": 512 * 3,
    }
    assert pod_shape(template)["requests.cpu"] == 2000  # as written: the bare containers ask for nothing
    # a second LimitRange fills only what the first left out
    more = defaults + container_defaults([_limit_range(defaultRequest={"cpu": "9", "ephemeral-storage": "1Gi"})])
    bare = with_defaults({"spec": {"containers": [{"name": "bare"}]}}, more)["spec"]["containers"][0]["resources"]
    assert bare["requests"] == {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "1Gi"}
    assert with_defaults(template, []) is template


def test_overhead_counts_on_limits_only_where_a_limit_is_set_and_a_pod_level_limit_replaces_the_sum() -> None:
    no_limits = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}], "overhead": {"cpu": "250m"}}}
    assert pod_shape(no_limits)["requests.cpu"] == 1250 and pod_shape(no_limits)["limits.cpu"] == 0
    pod_level = {
        "spec": {
            "containers": [{"resources": {"limits": {"cpu": "2"}}}, {"resources": {"limits": {"cpu": "2"}}}],
            "resources": {"limits": {"cpu": "3"}},
        }
    }
    assert pod_shape(pod_level)["limits.cpu"] == 3000


def test_memory_room_is_rounded_down_once_from_bytes() -> None:
    quota = {"status": {"hard": {"requests.memory": "1Gi"}, "used": {"requests.memory": "600M"}}}
    assert _rooms(quota) == {"requests.memory": 451}  # 451.8 MiB: 452 would let a 451.9 MiB pod "fit"


def _actuator(kube) -> Actuator:  # type: ignore[no-untyped-def]
    target = KubernetesTarget(kube.api_client(), [policy()], timeout_s=2.0)
    return Actuator(target, None, [policy()], SafetyConfig())


def test_a_scale_up_is_limited_by_a_quota_on_requests_the_template_gets_from_a_limit_range(kube) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))  # its container asks for nothing
    kube.cluster.put(
        QUOTAS, "default", "cpu", {"status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1"}}}
    )
    kube.cluster.put(LIMITRANGES, "default", "defaults", _limit_range(defaultRequest={"cpu": "500m"}))
    res = _actuator(kube).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 12, R),)), NOW)
    assert res[0].outcome == "applied"
    assert "limited by the namespace's ResourceQuota on requests.cpu (6 more pods allowed)" in res[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 8
    # and the planner's pool: 3000m left plus what web's 2 pods ask for now (2 x 500m)
    state = KubernetesTarget(kube.api_client(), [policy()], timeout_s=2.0).read_state([WEB])
    assert state.pod_shapes[WEB]["requests.cpu"] == 500
    assert state.resource_quotas == {"default": {"requests.cpu": 3000 + 2 * 500}}  # status.replicas: 2


def test_without_permission_to_read_limit_ranges_the_templates_count_as_written(kube, caplog) -> None:  # type: ignore[no-untyped-def]
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))
    kube.cluster.put(
        QUOTAS, "default", "cpu", {"status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1"}}}
    )
    kube.cluster.put(LIMITRANGES, "default", "defaults", _limit_range(defaultRequest={"cpu": "500m"}))
    kube.cluster.faults.append(Fault("GET", "/limitranges", status=403, times=10))
    res = _actuator(kube).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 12, R),)), NOW)
    assert res[0].outcome == "applied" and "limited" not in res[0].detail  # the API server's admission decides
    assert "cannot list LimitRanges in default" in caplog.text


def test_a_runtime_class_overhead_counts_in_the_quota_room(kube) -> None:  # type: ignore[no-untyped-def]
    """Admission writes the RuntimeClass's ``overhead.podFixed`` into each pod (Kata, gVisor); a
    template carries only ``runtimeClassName``."""
    web = deployment(2)
    web["spec"]["template"]["spec"]["runtimeClassName"] = "kata"
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "250m"}}
    kube.cluster.put(DEPLOYMENTS, "default", "web", web)
    kube.cluster.put(RUNTIMECLASSES, None, "kata", {"handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}})
    kube.cluster.put(
        QUOTAS, "default", "cpu", {"status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1"}}}
    )
    res = _actuator(kube).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 12, R),)), NOW)
    assert "limited by the namespace's ResourceQuota on requests.cpu (6 more pods allowed)" in res[0].detail
    state = KubernetesTarget(kube.api_client(), [policy()], timeout_s=2.0).read_state([WEB])
    assert state.pod_shapes[WEB]["requests.cpu"] == 500


def test_within_one_limit_range_a_later_container_item_wins() -> None:
    lr = {
        "spec": {
            "limits": [
                {"type": "Container", "defaultRequest": {"cpu": "100m"}, "default": {"cpu": "1"}},
                {"type": "Container", "defaultRequest": {"cpu": "200m", "memory": "64Mi"}, "default": {"cpu": "2"}},
            ]
        }
    }
    assert container_defaults([lr]) == [({"cpu": "2"}, {"cpu": "200m", "memory": "64Mi"})]


def test_a_scale_up_whose_pods_the_quota_would_refuse_for_an_unset_request_is_skipped_and_says_why(kube) -> None:  # type: ignore[no-untyped-def]
    """A quota on requests.cpu refuses a pod whose container sets no CPU request ("must specify
    requests.cpu") when no LimitRange gives one: no replica of it can start, however much room."""
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))  # its container sets nothing
    kube.cluster.put(
        QUOTAS, "default", "cpu", {"status": {"hard": {"requests.cpu": "40"}, "used": {"requests.cpu": "1"}}}
    )
    res = _actuator(kube).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 5, R),)), NOW)
    assert res[0].outcome == "skipped"
    assert "refuses pods whose containers do not set it" in res[0].detail and "requests.cpu" in res[0].detail
    assert kube.cluster.get(DEPLOYMENTS, "default", "web")["spec"]["replicas"] == 2
    # a scale-down is not held back by it
    assert _actuator(kube).apply_plan(Plan(NOW, (ScaleTo(WEB, 2, 1, R),)), NOW)[0].outcome == "applied"


def test_unset_keys_are_read_from_every_container_and_a_limit_sets_the_request() -> None:
    from actuator.kubernetes import unset_resources

    template = {
        "spec": {
            "containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "100m"}}}],
        }
    }
    keys = ["requests.cpu", "requests.memory", "limits.cpu", "limits.memory"]
    assert unset_resources(template, keys) == ["limits.cpu", "limits.memory", "requests.memory"]


def test_the_planner_holds_a_workload_whose_pods_the_quota_refuses_and_gives_the_room_to_others(kube) -> None:  # type: ignore[no-untyped-def]
    """The same quota seen by the planner (``ClusterState.quota_refused``): the workload whose
    container sets no CPU request is held at its count with the reason (before, the planner
    counted its pods as asking no CPU, planned them, and the actuator skipped them every cycle),
    and the other workload in the pool may take the room; a LimitRange default lifts the hold."""
    import numpy as np

    from planner import plan
    from scaleahead.types import Forecast

    api = WorkloadRef("Deployment", "default", "api")
    kube.cluster.put(DEPLOYMENTS, "default", "web", deployment(2))  # its container sets nothing
    sized = deployment(2)
    sized["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    kube.cluster.put(DEPLOYMENTS, "default", "api", sized)
    kube.cluster.put(
        QUOTAS, "default", "cpu", {"status": {"hard": {"requests.cpu": "6"}, "used": {"requests.cpu": "2"}}}
    )
    pols = [policy(), policy("api")]
    target = KubernetesTarget(kube.api_client(), pols, timeout_s=2.0)
    state = target.read_state([WEB, api])
    assert set(state.quota_refused) == {WEB} and "requests.cpu" in state.quota_refused[WEB]

    def wants(ref: WorkloadRef) -> Forecast:  # 9 replicas at 10 per replica and the 0.9 target
        return Forecast(ref, NOW - 10, 10.0, {0.5: np.full(90, 80.0), 0.9: np.full(90, 80.0), 0.99: np.full(90, 80.0)})

    from dataclasses import replace

    seen = {r: replace(ws, observed_demand=80.0, observed_at=NOW - 5) for r, ws in state.workloads.items()}
    state = replace(state, workloads=seen)  # Prometheus's part of the state
    got = {a.workload: a for a in plan({WEB: wants(WEB), api: wants(api)}, state, pols, NOW).actions}
    assert (got[WEB].from_replicas, got[WEB].to_replicas, got[WEB].reason.code) == (2, 2, "quota_refused")
    assert "the plan wanted 9" in got[WEB].reason.message and "sets none" in got[WEB].reason.message
    assert got[api].to_replicas == 6  # 4 CPUs left + its own 2: all of the pool
    kube.cluster.put(LIMITRANGES, "default", "defaults", _limit_range(defaultRequest={"cpu": "100m"}))
    target._limit_ranges.clear()
    assert target.read_state([WEB, api]).quota_refused == {}
