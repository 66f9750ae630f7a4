"""The CRD's CEL rules, evaluated by an independent CEL implementation, agree with the loader.

The API server refuses a custom resource that breaks one of the CRD's ``x-kubernetes-validations``
rules; the loader (``scaleahead.policy``) refuses a policy file that breaks one of its cross-field
rules. Both must say the same of every policy, or ``kubectl apply`` accepts a policy the control
loop then skips (or refuses one the CLI takes). Before 2026-12-05 three of the loader's rules had no
CEL at all, and the rules that had were checked only as strings here, so a rule that does not
compile (which makes the API server refuse the whole CRD) would have passed.

Evaluated here as the API server evaluates them: the CRD's structural defaults applied first, every
value of a ``type: number`` field a CEL double (an integer written into one included), ``self``
the object the rule sits on (``spec``, or ``spec.target`` for the target's rule). The CEL runtime is
cel-python (``celpy``), not Kubernetes' cel-go, so Kubernetes-only functions are not available; the
rules use none.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleahead.crd import crd
from scaleahead.errors import ConfigError
from scaleahead.policy import parse_policies
from tests.deploy.test_crd_defaults import apply_structural_defaults

REPO = Path(__file__).resolve().parents[2]
SPEC_SCHEMA: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
ENV = celpy.Environment()


def _as_kubernetes_reads(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as the API server hands it to CEL: numbers of ``type: number`` fields as floats."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _as_kubernetes_reads(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_kubernetes_reads(v, schema.get("items", {})) for v in value]
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _rules() -> list[tuple[tuple[str, ...], dict[str, str]]]:
    """Every CEL rule of the spec schema, with the path of the object it sits on."""
    out: list[tuple[tuple[str, ...], dict[str, str]]] = []

    def walk(schema: dict[str, Any], path: tuple[str, ...]) -> None:
        out.extend((path, rule) for rule in schema.get("x-kubernetes-validations", []))
        for key, sub in schema.get("properties", {}).items():
            walk(sub, (*path, key))

    walk(SPEC_SCHEMA, ())
    return out


RULES = _rules()
PROGRAMS = [(path, rule, ENV.program(ENV.compile(rule["rule"]))) for path, rule in RULES]


def cel_refusals(spec: dict[str, Any]) -> list[str]:
    """The messages of the CEL rules ``spec`` breaks, as the API server would apply them."""
    stored = _as_kubernetes_reads(apply_structural_defaults(copy.deepcopy(spec), SPEC_SCHEMA), SPEC_SCHEMA)
    refused = []
    for path, rule, program in PROGRAMS:
        obj: Any = stored
        for key in path:
            obj = obj.get(key) if isinstance(obj, dict) else None
        if obj is None:  # a rule on an absent object is not evaluated
            continue
        result = program.evaluate(celpy.json_to_cel({"self": obj}))
        if isinstance(result, celpy.CELEvalError):
            raise AssertionError(f"rule {rule['rule']!r} failed to evaluate on {obj!r}: {result}")
        if not bool(result):
            refused.append(rule["message"])
    return refused


def loader_refusal(spec: dict[str, Any]) -> str | None:
    doc = {
        "apiVersion": "scaleahead.io/v1alpha1",
        "kind": "PredictiveScalingPolicy",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }
    try:
        parse_policies(yaml.safe_dump(doc), "p.yaml")
    except ConfigError as exc:
        return exc.message
    return None


def _example_spec() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((REPO / "examples" / "policy.yaml").read_text())["spec"]
    return spec


def test_every_rule_compiles_and_the_example_passes_them_all() -> None:
    assert len(RULES) >= 8  # the spec's 7 and the target's floor rule
    assert cel_refusals(_example_spec()) == []
    assert loader_refusal(_example_spec()) is None
    # the smallest policy, everything else left to the CRD's defaults
    minimal = {"target": {"kind": "Deployment", "name": "web"}, "demand": {"query": "x"}, "capacityPerReplica": 1}
    assert cel_refusals(minimal) == []
    assert loader_refusal(minimal) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"objective": {"cost": 0, "sloRisk": 0}}, "objective.cost and objective.sloRisk are both 0"),
        ({"demand": {"query": "x", "stepSeconds": 60}, "rampFloor": {"windowSeconds": 120}}, "rampFloor.windowSeconds"),
        (
            {"objective": {"riskAdaptation": {"windowSeconds": 1800, "periodSeconds": 3600}}},
            "riskAdaptation.windowSeconds must be at least",
        ),
        ({"minReplicas": 5, "maxReplicas": 4}, "minReplicas must not exceed maxReplicas"),
    ],
)
def test_the_api_server_refuses_what_the_loader_refuses(change: dict[str, Any], message: str) -> None:
    spec = {**_example_spec(), **change}
    assert any(message in m for m in cel_refusals(spec)), cel_refusals(spec)
    assert loader_refusal(spec) is not None


def test_an_integer_in_a_number_field_is_read_as_a_double() -> None:
    """``cost: 1`` and ``sloRisk: 0`` written as integers: the API server hands a ``type: number``
    field to CEL as a double whatever was written (k8s.io/apiserver/pkg/cel/common/values.go,
    ``UnstructuredToVal``), and the rules compare doubles with doubles (``0.0``): an int literal
    there is a type error when the CRD's rules are compiled against the schema."""
    spec = {**_example_spec(), "objective": {"cost": 1, "sloRisk": 0}}
    assert cel_refusals(spec) == []
    assert loader_refusal(spec) is None


_NUMBER = st.sampled_from([0, 0.5, 1, 10, 30, 60, 100, 120, 300, 1800, 3600, 86400])


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """Policies that vary exactly the fields the cross-field rules read (each field given or not)."""
    spec = _example_spec()
    for key in ("objective", "rampFloor", "startupLearning", "fallback", "warmPool", "workloadClass"):
        spec.pop(key, None)
    spec["target"] = {k: v for k, v in spec["target"].items() if k not in ("mode", "hpaName")}
    spec["demand"] = {
        "query": "x",
        **draw(st.fixed_dictionaries({}, optional={"stepSeconds": st.sampled_from([1, 10, 60, 100, 300])})),
    }
    counts = st.integers(0, 8)
    spec.update(draw(st.fixed_dictionaries({}, optional={"minReplicas": counts, "maxReplicas": st.integers(1, 8)})))
    objective = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "cost": st.sampled_from([0, 0.0, 1, 2.5]),
                "sloRisk": st.sampled_from([0, 0.0, 80, 1.5]),
                "riskAdaptation": st.fixed_dictionaries(
                    {}, optional={"windowSeconds": _NUMBER.filter(bool), "periodSeconds": _NUMBER.filter(bool)}
                ),
            },
        )
    )
    if draw(st.booleans()):
        spec["objective"] = objective
    ramp = draw(st.fixed_dictionaries({}, optional={"windowSeconds": _NUMBER, "minTStat": st.just(3)}))
    if draw(st.booleans()):
        spec["rampFloor"] = ramp
    learning = draw(
        st.fixed_dictionaries({}, optional={"minSamples": st.integers(1, 60), "window": st.integers(1, 60)})
    )
    if draw(st.booleans()):
        spec["startupLearning"] = learning
    fallback = draw(
        st.fixed_dictionaries(
            {}, optional={"mode": st.sampled_from(["reactive", "current", "static"]), "staticReplicas": counts}
        )
    )
    if draw(st.booleans()):
        spec["fallback"] = fallback
    if draw(st.booleans()):
        spec["workloadClass"] = draw(st.sampled_from(["service", "function"]))
        spec["warmPool"] = {"enabled": draw(st.booleans())}
        spec["target"]["kind"] = draw(st.sampled_from(["Deployment", "KnativeService"]))
    mode = draw(st.sampled_from([None, "direct", "floor"]))
    if mode is not None:
        spec["target"]["mode"] = mode
        if draw(st.booleans()):
            spec["target"]["hpaName"] = "web"
    return spec


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_the_crd_and_the_loader_agree_on_every_cross_field_rule(spec: dict[str, Any]) -> None:
    refused_by_cel = cel_refusals(spec)
    refused_by_loader = loader_refusal(spec)
    assert bool(refused_by_cel) == (refused_by_loader is not None), (refused_by_cel, refused_by_loader)


_PATH = re.compile(r"\bself((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_NUMBER_LITERAL = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])")


def _field(schema: dict[str, Any], names: list[str]) -> dict[str, Any] | None:
    for name in names:
        props = schema.get("properties", {})
        if name not in props:
            return None
        schema = props[name]
    return schema


def test_every_field_a_rule_names_exists_with_one_numeric_type_per_rule() -> None:
    """What cel-python cannot check, since it compiles without the schema, and the API server's
    cel-go does when the CRD is applied (a failure refuses the whole CRD; found in review): every
    ``self.a.b`` a rule names, and its ``fieldPath``, is a property of the schema; and a rule's
    numbers are of one kind, doubles (``0.0``) against ``type: number`` fields and integers against
    ``type: integer`` ones (CEL has no int-double overloads to fall back on)."""
    for path, rule in RULES:
        on: Any = _field(SPEC_SCHEMA, list(path))
        assert on is not None, path
        kinds = set()
        for match in _PATH.finditer(rule["rule"]):
            names = match.group(1).split(".")[1:]
            field = _field(on, names)
            assert field is not None, f"{rule['rule']!r} names self.{'.'.join(names)}, which the schema lacks"
            if field.get("type") in ("number", "integer"):
                kinds.add(field["type"])
        fp = rule.get("fieldPath")
        if fp:
            assert _field(on, fp.lstrip(".").split(".")) is not None, fp
        assert len(kinds) <= 1, f"{rule['rule']!r} mixes number and integer fields"
        literals = _NUMBER_LITERAL.findall(rule["rule"])
        if kinds == {"number"}:
            assert all("." in x or "e" in x.lower() for x in literals), rule["rule"]
        if kinds == {"integer"}:
            assert not any("." in x for x in literals), rule["rule"]
