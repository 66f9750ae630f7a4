"""Policy inputs that used to pass and then misbehave: non-finite numbers, floor without an HPA,
repeated keys, one workload in two policies, booleans and strings for numbers, absurd start-ups."""

from __future__ import annotations

import copy
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scaleahead.crd import crd
from scaleahead.errors import ConfigError
from scaleahead.policy import load_policies, load_policy_files, parse_policies, policy_json_schema

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "policy.yaml"


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


def _line(text: str, needle: str, nth: int = 1) -> int:
    hits = [i for i, t in enumerate(text.splitlines(), 1) if needle in t]
    return hits[nth - 1]


def _number_fields(schema: dict[str, Any], defs: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of every ``number`` field of the spec schema (nested objects included)."""
    out: list[tuple[str, ...]] = []
    for name, node in schema.get("properties", {}).items():
        if "$ref" in node:
            out += _number_fields(defs[node["$ref"].rsplit("/", 1)[-1]], defs, (*prefix, name))
        elif node.get("type") == "number" or any(s.get("type") == "number" for s in node.get("anyOf", [])):
            out.append((*prefix, name))
    return out


SCHEMA = policy_json_schema()
NUMBER_FIELDS = _number_fields(SCHEMA, SCHEMA.get("$defs", {}))


def _with(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out["spec"]
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return out


# -- 1. inf and nan --------------------------------------------------------------------------------
def test_every_number_field_is_found() -> None:
    assert len(NUMBER_FIELDS) >= 25
    assert ("capacityPerReplica",) in NUMBER_FIELDS and ("objective", "riskAdaptation", "maxFactor") in NUMBER_FIELDS


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("path", NUMBER_FIELDS, ids=".".join)
def test_no_number_field_takes_inf_or_nan(path: tuple[str, ...], value: float) -> None:
    text = yaml.safe_dump(_with(_example(), path, value), sort_keys=False)  # written .inf / -.inf / .nan
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    field = "spec." + ".".join(path)
    assert f": field '{field}': Input should be a finite number" in err.value.message
    assert err.value.message.startswith("Invalid policy. p.yaml:")


def test_capacity_per_replica_inf_names_file_line_and_field() -> None:
    text = EXAMPLE.read_text().replace("capacityPerReplica: 2.0", "capacityPerReplica: .inf")
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    line = _line(text, "capacityPerReplica: .inf")
    assert f"p.yaml:{line}: field 'spec.capacityPerReplica': Input should be a finite number" in err.value.message


# -- 2. mode floor needs hpaName -------------------------------------------------------------------
def test_floor_without_hpa_name_is_rejected_at_validation() -> None:
    text = EXAMPLE.read_text().replace("mode: direct", "mode: floor")
    with pytest.raises(ConfigError, match=r"p.yaml:\d+: field 'spec.target': .*mode floor needs target.hpaName"):
        parse_policies(text, "p.yaml")


def test_floor_with_hpa_name_is_accepted() -> None:
    text = EXAMPLE.read_text().replace("mode: direct", "mode: floor").replace("# hpaName: web ", "hpaName: web ")
    (policy,) = parse_policies(text, "p.yaml")
    assert policy.spec.target.hpa_name == "web"


def test_the_crd_carries_the_floor_rule_for_the_api_server() -> None:
    spec = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = spec["properties"]["target"]["x-kubernetes-validations"]
    assert any("floor" in r["rule"] and "has(self.hpaName)" in r["rule"] for r in rules)


def test_a_functions_warm_pool_needs_a_knative_service_in_the_policy_and_the_crd() -> None:
    spec = _example()["spec"]
    spec.update(workloadClass="function", warmPool={"enabled": True, "memoryMbPerInstance": 128})
    with pytest.raises(ConfigError, match=r"needs target.kind KnativeService .* \(target.kind is Deployment\)"):
        parse_policies(yaml.safe_dump({**_example(), "spec": spec}), "p.yaml")
    rules = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    assert any("warmPool.enabled" in r["rule"] and "KnativeService" in r["rule"] for r in rules)
    spec["target"] = {**spec["target"], "kind": "KnativeService"}
    (policy,) = parse_policies(yaml.safe_dump({**_example(), "spec": spec}), "p.yaml")
    assert policy.spec.warm_pool.enabled
    spec["target"]["kind"] = "Deployment"
    spec["warmPool"]["enabled"] = False  # a function without a warm pool is scaled as a service
    assert parse_policies(yaml.safe_dump({**_example(), "spec": spec}), "p.yaml")


# -- 3. a key written twice --------------------------------------------------------------------------
def test_a_repeated_key_is_rejected_with_both_lines() -> None:
    text = EXAMPLE.read_text().replace("  minReplicas: 1\n", "  minReplicas: 1\n  minReplicas: 40\n")
    first, second = _line(text, "minReplicas: 1"), _line(text, "minReplicas: 40")
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    assert f"p.yaml:{second}: key 'minReplicas' appears twice in one mapping (lines {first} and {second})" in (
        err.value.message
    )


def test_a_repeated_nested_key_is_rejected() -> None:
    text = EXAMPLE.read_text().replace("    quantile: 0.9 ", "    quantile: 0.5\n    quantile: 0.9 ")
    with pytest.raises(ConfigError, match="key 'quantile' appears twice"):
        parse_policies(text, "p.yaml")


def test_a_merge_key_may_still_be_overridden() -> None:
    doc = """
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {name: web}
spec:
  target: {name: web}
  demand: {query: q}
  capacityPerReplica: 2
  startupLearning:
    <<: {minSamples: 5, window: 50}
    minSamples: 7
"""
    (policy,) = parse_policies(doc, "p.yaml")
    assert policy.spec.startup_learning.min_samples == 7


# -- 4. one workload, two policies -------------------------------------------------------------------
def test_one_workload_in_two_documents_is_rejected_with_both_locations() -> None:
    one = EXAMPLE.read_text()
    text = one + "---\n" + one.replace("  name: web\n  namespace: default\n", "  name: web-again\n", 1)
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    first, second = _line(text, "  target:", 1), _line(text, "  target:", 2)
    msg = err.value.message
    assert "Two policies target Deployment/default/web" in msg
    assert f"default/web (p.yaml:{first})" in msg and f"default/web-again (p.yaml:{second})" in msg


def test_a_target_namespace_taken_from_the_metadata_counts_too() -> None:
    doc = "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\n"
    doc += "metadata: {{name: {n}, namespace: shop}}\n"
    doc += "spec: {{target: {{name: web{ns}}}, demand: {{query: q}}, capacityPerReplica: 2}}\n"
    text = doc.format(n="a", ns="") + "---\n" + doc.format(n="b", ns=", namespace: shop")
    with pytest.raises(ConfigError, match="Two policies target Deployment/shop/web"):
        parse_policies(text, "p.yaml")


def test_other_kinds_and_namespaces_are_other_workloads() -> None:
    one = EXAMPLE.read_text()
    text = "---\n".join(
        [
            one,
            one.replace("kind: Deployment ", "kind: StatefulSet "),
            one.replace("    namespace: default\n", "    namespace: other\n"),
        ]
    )
    assert len(parse_policies(text, "p.yaml")) == 3


def test_one_workload_in_two_files_names_both_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(EXAMPLE.read_text())
    b.write_text(EXAMPLE.read_text().replace("  name: web\n  namespace: default\n", "  name: web-b\n", 1))
    with pytest.raises(ConfigError) as err:
        load_policy_files([a, b])
    assert f"({a}:{_line(a.read_text(), '  target:')})" in err.value.message
    assert f"({b}:{_line(b.read_text(), '  target:')})" in err.value.message
    other = tmp_path / "c.yaml"
    other.write_text(EXAMPLE.read_text().replace("    name: web\n", "    name: api\n"))
    assert [p.workload.name for p in load_policy_files([a, other])] == ["web", "api"]


def test_plan_refuses_a_file_with_one_workload_twice(tmp_path: Path) -> None:
    pol = tmp_path / "dup.yaml"
    pol.write_text(EXAMPLE.read_text() + "---\n" + EXAMPLE.read_text())
    db = tmp_path / "a.db"
    out = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "plan", "--policy", str(pol), "--history", "nasa-10s"]
        + ["--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "Two policies target Deployment/default/web" in out.stderr
    assert not db.exists()


# -- 5. booleans and strings are not numbers -----------------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "field", "says"),
    [
        ("minReplicas: 1", "minReplicas: true", "spec.minReplicas", "Input should be an integer, not the boolean true"),
        ("minReplicas: 1", 'minReplicas: "3"', "spec.minReplicas", "not the string '3' (write it without quotes)"),
        ("maxStepUp: 20", "maxStepUp: no", "spec.maxStepUp", "Input should be an integer, not the boolean false"),
        ("priority: 0", "priority: '1'", "spec.priority", "Input should be an integer, not the string '1'"),
        ("window: 50", "window: yes", "spec.startupLearning.window", "an integer, not the boolean true"),
        ("capacityPerReplica: 2.0", 'capacityPerReplica: "2.0"', "spec.capacityPerReplica", "a number, not the string"),
        ("capacityPerReplica: 2.0", "capacityPerReplica: true", "spec.capacityPerReplica", "a number, not the boolean"),
        ("capacityPerReplica: 2.0", "capacityPerReplica: two", "spec.capacityPerReplica", "not the string 'two'."),
        ("weight: 1.0", "weight: on", "spec.weight", "Input should be a number, not the boolean true"),
    ],
)
def test_booleans_and_strings_are_not_coerced_to_numbers(old: str, new: str, field: str, says: str) -> None:
    text = EXAMPLE.read_text().replace(old, new)
    assert text != EXAMPLE.read_text()
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    assert f"p.yaml:{_line(text, new)}: field '{field}': " in err.value.message
    assert says in err.value.message


def test_optional_numbers_reject_booleans_and_strings_too() -> None:
    for old, new in [
        ("# staticReplicas: 4 ", "staticReplicas: true "),
        ("# forecastQuantile: 0.9 ", "forecastQuantile: '0.9' "),
        ("# memoryBudgetMb: 512", "memoryBudgetMb: false"),
    ]:
        text = EXAMPLE.read_text().replace(old, new)
        assert text != EXAMPLE.read_text()
        with pytest.raises(ConfigError, match=r"should be an? (integer|number), not the"):
            parse_policies(text, "p.yaml")


def test_integers_still_fill_number_fields_and_whole_floats_integer_fields() -> None:
    text = (
        EXAMPLE.read_text()
        .replace("capacityPerReplica: 2.0", "capacityPerReplica: 2")
        .replace("maxReplicas: 60", "maxReplicas: 60.0")
    )
    (policy,) = parse_policies(text, "p.yaml")
    assert policy.spec.capacity_per_replica == 2.0 and isinstance(policy.spec.capacity_per_replica, float)
    assert policy.spec.max_replicas == 60 and isinstance(policy.spec.max_replicas, int)


def test_exponent_numbers_are_numbers_as_in_json() -> None:
    # PyYAML alone reads 1e1 as the string "1e1"; JSON, YAML 1.2 and kubectl read a number.
    text = EXAMPLE.read_text().replace("stepSeconds: 10 ", "stepSeconds: 1e1 ").replace("weight: 1.0", "weight: 2.5e-1")
    (policy,) = parse_policies(text, "p.yaml")
    assert policy.spec.demand.step_seconds == 10.0 and policy.spec.weight == 0.25


def test_the_policy_as_a_custom_resource_still_validates_from_json_numbers() -> None:
    """What the Kubernetes client hands over: ints and floats, never strings for numbers."""
    from scaleahead.policy import Policy

    doc = _example()
    doc["spec"]["capacityPerReplica"] = 2
    doc["spec"]["objective"]["cost"] = 1
    assert Policy.model_validate(doc).spec.capacity_per_replica == 2.0


# -- 7. startupSeconds has an upper bound ----------------------------------------------------------------
def test_startup_seconds_above_a_day_is_rejected() -> None:
    text = EXAMPLE.read_text().replace("startupSeconds: 60 ", "startupSeconds: 1e12 ")
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    line = _line(text, "startupSeconds: 1e12")
    assert f"p.yaml:{line}: field 'spec.startupSeconds': Input should be less than or equal to 86400" in (
        err.value.message
    )
    (policy,) = parse_policies(EXAMPLE.read_text().replace("startupSeconds: 60 ", "startupSeconds: 86400 "), "p")
    assert policy.spec.startup_seconds == 86400.0


def test_the_crd_schema_bounds_startup_seconds_too() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec = _example()["spec"]
    spec["startupSeconds"] = 1e12
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(spec))
    assert any("startupSeconds" in "/".join(str(p) for p in e.absolute_path) for e in errors)


# -- replica counts are Kubernetes int32s ------------------------------------------------------------------
@pytest.mark.parametrize("field", ["maxReplicas", "minReplicas", "maxStepUp", "maxStepDown"])
def test_replica_counts_above_int32_are_rejected_by_the_policy_and_the_crd(field: str) -> None:
    spec = _example()["spec"]
    spec[field] = 2**31
    with pytest.raises(ConfigError, match=f"field 'spec.{field}': Input should be less than or equal to 2147483647"):
        parse_policies(yaml.safe_dump({**_example(), "spec": spec}), "p.yaml")
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(spec))
    assert [e.absolute_path[-1] for e in errors] == [field]
    spec[field] = 2**31 - 1
    spec["maxReplicas"] = 2**31 - 1
    (policy,) = parse_policies(yaml.safe_dump({**_example(), "spec": spec}), "p.yaml")
    assert policy.spec.max_replicas == 2**31 - 1


# -- a file that is not text ----------------------------------------------------------------------------
def test_a_binary_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ConfigError, match=r"p.yaml is not UTF-8 text"):
        load_policies(bad)


def test_run_policies_folder_names_both_files_of_a_workload_targeted_twice(tmp_path: Path) -> None:
    from scaleahead.commands.run import load_policy_path

    (tmp_path / "a.yaml").write_text(EXAMPLE.read_text())
    (tmp_path / "b.yml").write_text(
        EXAMPLE.read_text().replace("  name: web\n  namespace: default\n", "  name: web-b\n", 1)
    )
    with pytest.raises(ConfigError) as err:
        load_policy_path(tmp_path)
    assert str(tmp_path / "a.yaml") in err.value.message and str(tmp_path / "b.yml") in err.value.message
    (tmp_path / "b.yml").unlink()
    assert [p.workload.name for p in load_policy_path(tmp_path)] == ["web"]


def test_yaml_nested_thousands_deep_is_a_config_error_not_a_recursion_traceback() -> None:
    from scaleahead.errors import ConfigError
    from scaleahead.policy import parse_policies

    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_policies("a: " + "[" * 5000 + "]" * 5000, "deep.yaml")


# -- target namespace and name are Kubernetes names --------------------------------------------------------
def _with_target(**target: Any) -> dict[str, Any]:
    doc = _example()
    doc["spec"]["target"] = {**doc["spec"]["target"], **target}
    return doc


@pytest.mark.parametrize(
    ("target", "field", "says"),
    [
        ({"namespace": ""}, "namespace", "'' is not a Kubernetes namespace name: it must be a DNS-1123 label"),
        ({"namespace": "a/b"}, "namespace", "'a/b' is not a Kubernetes namespace name"),
        ({"namespace": "Shop"}, "namespace", "'Shop' is not a Kubernetes namespace name"),
        ({"namespace": "a.b"}, "namespace", "'a.b' is not a Kubernetes namespace name"),
        (
            {"namespace": "n" * 64},
            "namespace",
            r"n+\.\.\. \(64 characters\) is not a Kubernetes namespace name: at most 63",
        ),
        ({"name": " web"}, "name", "' web' is not a Kubernetes object name: it must be a DNS-1123 subdomain"),
        ({"name": "b/c"}, "name", "'b/c' is not a Kubernetes object name"),
        ({"name": "web-"}, "name", "'web-' is not a Kubernetes object name"),
        ({"name": "web_1"}, "name", "'web_1' is not a Kubernetes object name"),
        ({"name": "w" * 300}, "name", r"w+\.\.\. \(300 characters\) is not a Kubernetes object name: at most 253"),
        ({"mode": "floor", "hpaName": "Web"}, "hpaName", "'Web' is not a Kubernetes object name"),
    ],
)
def test_a_target_that_no_kubernetes_object_can_be_is_refused_naming_file_line_and_field(
    target: dict[str, Any], field: str, says: str
) -> None:
    # Before, '' gave the workload key Deployment//web, ' web' and 'a/b' were accepted, and
    # (namespace a, name b/c) and (namespace a/b, name c) were taken for one workload.
    text = yaml.safe_dump(_with_target(**target), sort_keys=False)
    with pytest.raises(ConfigError, match=rf"p.yaml:\d+: field 'spec.target.{field}': {says}"):
        parse_policies(text, "p.yaml")


def test_kubernetes_names_at_their_longest_are_accepted() -> None:
    name = ".".join(["a" * 63] * 4)[:253].rstrip(".")
    (policy,) = parse_policies(yaml.safe_dump(_with_target(namespace="n" * 63, name=name)), "p.yaml")
    assert policy.workload.key == f"Deployment/{'n' * 63}/{name}"
    (policy,) = parse_policies(yaml.safe_dump(_with_target(namespace="0-a", name="web.v1-2")), "p.yaml")
    assert policy.workload.key == "Deployment/0-a/web.v1-2"


@pytest.mark.parametrize(
    ("target", "field"),
    [({"namespace": "a/b"}, "namespace"), ({"name": "w" * 254}, "name"), ({"name": "Web"}, "name")],
)
def test_the_crd_refuses_the_same_target_names(target: dict[str, Any], field: str) -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec = _with_target(**target)["spec"]
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(spec))
    assert [list(e.absolute_path) for e in errors] == [["target", field]]
    assert not list(jsonschema.Draft4Validator(schema).iter_errors(_example()["spec"]))


def test_names_built_from_trace_names_are_kubernetes_names() -> None:
    from scaleahead.bench.rollout_loop import _slug
    from scaleahead.policy import DNS_LABEL, to_dns_label

    for text in ("NAB/realKnownCause/machine_temperature_system_failure.csv", "é-x", "---", "a" * 39 + "-b" * 5):
        for made in (to_dns_label(text), _slug(text, 3), to_dns_label(f"fn-1-{text}")):
            assert re.match(DNS_LABEL, made) and len(made) <= 63, (text, made)
    assert to_dns_label("machine_temperature") == "machine-temperature"
    assert to_dns_label("---", fallback="trace") == "trace"


# -- the policy object's own name, its rollout group and tenant --------------------------------------------
@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"metadata": {"name": "Web_1"}}, "metadata.name", "'Web_1' is not a Kubernetes policy name"),
        ({"metadata": {"name": ""}}, "metadata.name", "'' is not a Kubernetes policy name"),
        ({"metadata": {"name": "web", "namespace": "Shop"}}, "metadata.namespace", "'Shop' is not a Kubernetes"),
        ({"spec": {"rolloutGroup": ""}}, "spec.rolloutGroup", "String should have at least 1 character"),
        ({"spec": {"tenant": ""}}, "spec.tenant", "'' is not a tenant name"),
        ({"spec": {"tenant": "*"}}, "spec.tenant", r"'\*' is not a tenant name: it must be letters, digits"),
        ({"spec": {"tenant": "a=b,c"}}, "spec.tenant", "'a=b,c' is not a tenant name"),
        ({"spec": {"tenant": "t" * 64}}, "spec.tenant", r"'t+'\.\.\. \(64 characters\) is not a tenant name"),
    ],
)
def test_a_policy_name_namespace_rollout_group_or_tenant_no_object_can_have_is_refused(
    change: dict[str, Any], field: str, says: str
) -> None:
    # Before, a policy named 'Web_1' or in namespace 'Shop' was loaded from a file (the API server
    # would refuse it as a custom resource), and an empty rolloutGroup or tenant was taken as a name.
    doc = _example()
    for part, values in change.items():
        doc[part] = {**doc[part], **values} if part == "spec" else values
    with pytest.raises(ConfigError, match=rf"p.yaml:\d+: field '{re.escape(field)}': {says}"):
        parse_policies(yaml.safe_dump(doc, sort_keys=False), "p.yaml")


def test_the_crd_refuses_an_empty_rollout_group_or_tenant() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for field, value in (("rolloutGroup", ""), ("tenant", ""), ("tenant", "*"), ("tenant", "a=b")):
        spec = {**_example()["spec"], field: value}
        errors = list(jsonschema.Draft4Validator(schema).iter_errors(spec))
        assert errors and {tuple(e.absolute_path) for e in errors} == {(field,)}
    for tenant in ("team-a", "Shop_1.eu", "a"):
        assert not list(jsonschema.Draft4Validator(schema).iter_errors({**_example()["spec"], "tenant": tenant}))
        (policy,) = parse_policies(yaml.safe_dump({**_example(), "spec": {**_example()["spec"], "tenant": tenant}}))
        assert policy.spec.tenant == tenant


def test_a_lone_surrogate_escape_is_refused_with_file_and_line_and_a_pair_of_them_is_one_character() -> None:
    """``"\\ud800"`` in a double-quoted string is half a character: the plan's record then failed
    with a traceback, every cycle. A JSON-style pair of halves is the character it spells."""
    text = EXAMPLE.read_text()
    line = _line(text, "unit: req/10s")
    bad = text.replace("unit: req/10s ", 'unit: "req\\ud800" ', 1)
    with pytest.raises(ConfigError, match=rf"p.yaml:{line}: the string 'req\\ud800' holds '\\ud800', a lone surrogate"):
        parse_policies(bad, "p.yaml")
    pair = text.replace("unit: req/10s ", 'unit: "req\\ud83d\\ude00" ', 1)
    (policy,) = parse_policies(pair, "p.yaml")
    assert policy.spec.demand.unit == "req\U0001f600"
    # the lone half is named, not the first half of a pair before it
    both = text.replace("unit: req/10s ", 'unit: "\\ud83d\\ude00 \\udc00" ', 1)
    with pytest.raises(ConfigError, match=r"the string '\U0001f600 \\udc00' holds '\\udc00'"):
        parse_policies(both, "p.yaml")
    # a key written as a pair of escapes is the same key as the character itself
    twice = text.replace("    unit: req/10s ", '    "\\ud83d\\ude00": 1\n    "\U0001f600": 2\n    unit: req/10s ', 1)
    with pytest.raises(ConfigError, match="appears twice in one mapping"):
        parse_policies(twice, "p.yaml")
