"""The CRD's defaults, applied as the API server applies them, change nothing a policy means.

A real API server fills every ``default:`` of a CRD's structural schema into the objects it stores
(and reads back): a policy in a cluster reaches the loader with those fields set, where the same
policy in a file has them unset. A field whose absence means something (``target.namespace``: the
object's namespace; ``rampFloor.windowSeconds``: refused only when given) must therefore have no
default in the CRD. Found in review: with ``default: default`` on ``target.namespace`` a policy in
namespace ``fn`` scaled ``default/<name>``, and ``rampFloor.windowSeconds: 300`` refused every policy
at 300-s steps that set ``rampFloor.minTStat``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from actuator.policy_resources import ClusterPolicies
from scaleahead.crd import crd
from scaleahead.errors import ConfigError
from scaleahead.policy import NO_SERVER_DEFAULT, Policy, parse_policies, policy_json_schema

ROOT = Path(__file__).resolve().parents[2]


def _schema() -> dict[str, Any]:
    out: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


def apply_structural_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """Fill ``default``s into ``obj`` as apiextensions does: in every object that is present, each absent
    property with a default gets it (a copy), then the walk goes on into the properties present and
    into array items. A default is applied where the property is absent, not where it is null on a
    nullable field."""
    if isinstance(obj, dict) and "properties" in schema:
        for key, sub in schema["properties"].items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_structural_defaults(obj[key], sub)
    elif isinstance(obj, list) and "items" in schema:
        for item in obj:
            apply_structural_defaults(item, schema["items"])
    return obj


class _Objects:
    """``CustomObjectsApi`` listing fixed objects (what the API server returns)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list_cluster_custom_object(self, *args: Any) -> dict[str, Any]:
        return {"items": copy.deepcopy(self.items)}


def _cluster_load(item: dict[str, Any]) -> tuple[list[Policy], dict[str, str]]:
    """The daemon's cluster loader on ``item`` as a real API server stores it (the CRD's defaults applied)."""
    loader = ClusterPolicies(client.ApiClient(client.Configuration()))
    loader.custom = _Objects([apply_structural_defaults(copy.deepcopy(item), _schema())])
    return loader.load(), loader.invalid


def _file_load(item: dict[str, Any]) -> Policy | str:
    try:
        return parse_policies(yaml.safe_dump(item))[0]
    except ConfigError as exc:
        return str(exc)


def _cr(spec: dict[str, Any], namespace: str = "fn", name: str = "f0") -> dict[str, Any]:
    return {
        "apiVersion": "scaleahead.io/v1alpha1",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _assert_same(item: dict[str, Any]) -> None:
    from_file = _file_load(item)
    policies, invalid = _cluster_load(item)
    if isinstance(from_file, str):
        assert not policies and invalid, f"refused from a file ({from_file}) but accepted in the cluster"
        return
    assert not invalid, f"valid from a file, refused in the cluster: {invalid}"
    (policy,) = policies
    assert policy.workload == from_file.workload
    # the one intended difference: in the cluster the tenant is the object's namespace
    # (actuation.tenant_from_namespace; docs/operations.md, Security)
    assert from_file.spec.tenant == "default" and policy.spec.tenant == item["metadata"]["namespace"]
    assert policy.spec.model_dump() == {**from_file.spec.model_dump(), "tenant": policy.spec.tenant}


def test_a_policy_without_target_namespace_scales_its_own_namespace_in_the_cluster_too() -> None:
    item = _cr(
        {
            "target": {"kind": "KnativeService", "name": "f0"},
            "demand": {"query": "sum(increase(x[1m]))", "stepSeconds": 60},
            "capacityPerReplica": 1,
            "workloadClass": "function",
            "warmPool": {"enabled": True},
        }
    )
    policies, _ = _cluster_load(item)
    assert [p.workload.key for p in policies] == ["KnativeService/fn/f0"]
    _assert_same(item)


def test_a_ramp_floor_without_window_is_accepted_at_five_minute_steps_in_the_cluster_too() -> None:
    item = _cr(
        {
            "target": {"name": "web", "namespace": "shop"},
            "demand": {"query": "q", "stepSeconds": 300},
            "capacityPerReplica": 1,
            "rampFloor": {"minTStat": 2},
        },
        namespace="shop",
        name="web",
    )
    assert isinstance(_file_load(item), Policy)
    policies, invalid = _cluster_load(item)
    assert not invalid and [p.workload.key for p in policies] == ["Deployment/shop/web"]
    _assert_same(item)


def _objects(schema: dict[str, Any], defs: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, node in schema.get("properties", {}).items():
        ref = node.get("$ref") or next((s.get("$ref") for s in node.get("anyOf", []) if "$ref" in s), None)
        sub = defs[ref.rsplit("/", 1)[-1]] if ref else {}
        if "properties" in sub:  # an object, not an enum
            yield name, sub


@pytest.mark.parametrize("step", [10, 60, 300])
@pytest.mark.parametrize("function", [False, True])
def test_every_object_present_but_empty_means_the_same_from_a_file_and_from_the_cluster(
    step: int, function: bool
) -> None:
    """Each optional object of the spec written as ``{}``: the API server fills in all its defaults."""
    schema = policy_json_schema()
    spec: dict[str, Any] = {
        "target": {"kind": "KnativeService" if function else "Deployment", "name": "w"},
        "demand": {"query": "q", "stepSeconds": step},
        "capacityPerReplica": 1,
    }
    for name, sub in _objects(schema, schema.get("$defs", {})):
        spec.setdefault(name, {})
        for inner, _ in _objects(sub, schema.get("$defs", {})):
            spec[name].setdefault(inner, {})
    if function:
        spec["workloadClass"] = "function"
        spec["warmPool"] = {"enabled": True}
    item = _cr(spec, namespace="team-a")
    assert isinstance(_file_load(item), Policy)  # a valid policy: the comparison is not between two refusals
    _assert_same(item)


def test_the_crd_has_no_default_where_the_policy_schema_marks_that_unset_matters() -> None:
    def marked(node: Any, path: str) -> Iterator[str]:
        if isinstance(node, dict):
            if node.get(NO_SERVER_DEFAULT):
                yield path
            for key, value in node.items():
                yield from marked(value, f"{path}.{key}")
        elif isinstance(node, list):
            for value in node:
                yield from marked(value, path)

    schema = policy_json_schema()
    paths = set(marked(schema, ""))
    assert any(p.endswith("Target.properties.namespace") for p in paths)
    assert any(p.endswith("RampFloor.properties.windowSeconds") for p in paths)
    spec = _schema()["properties"]["spec"]["properties"]
    assert "default" not in spec["target"]["properties"]["namespace"]
    assert "default" not in spec["rampFloor"]["properties"]["windowSeconds"]
    assert NO_SERVER_DEFAULT not in (ROOT / "deploy" / "base" / "crd.yaml").read_text()
