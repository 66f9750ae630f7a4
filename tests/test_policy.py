"""The policy schema: the example loads, errors name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaleahead.errors import ConfigError
from scaleahead.policy import FallbackMode, load_policies, parse_policies

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"


def test_example_policy_describes_deployment_web_in_default() -> None:
    (policy,) = load_policies(EXAMPLE)
    assert policy.workload.key == "Deployment/default/web"
    assert policy.spec.fallback.mode == FallbackMode.REACTIVE


def test_error_names_file_line_and_field() -> None:
    text = EXAMPLE.read_text().replace("maxReplicas: 60", "maxReplicas: lots")
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "maxReplicas: lots" in t)
    assert f"p.yaml:{line}: field 'spec.maxReplicas'" in err.value.message


def test_min_above_max_is_rejected() -> None:
    text = EXAMPLE.read_text().replace("minReplicas: 1", "minReplicas: 99")
    with pytest.raises(ConfigError, match="must not exceed maxReplicas"):
        parse_policies(text, "p.yaml")


def test_unknown_field_is_rejected() -> None:
    text = EXAMPLE.read_text().replace("  tenant: default", "  tennant: default")
    with pytest.raises(ConfigError, match="tennant"):
        parse_policies(text, "p.yaml")


def test_broken_yaml_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"p.yaml:2: not valid YAML"):
        parse_policies("a: 1\nb: c: d\n", "p.yaml")


@pytest.mark.parametrize(
    ("field", "value"),
    [("  target:\n    name", '"web\\n"'), ("  tenant", '"shop\\n"'), ("  target:\n    namespace", '"shop\\n"')],
)
def test_a_name_with_a_trailing_newline_is_refused_as_the_api_server_refuses_it(field: str, value: str) -> None:
    """`re.match` with `^...$` took "web\\n" ("$" matches before a final newline), so the loader
    accepted names the API server's pattern refuses (a review of 2026-12-07)."""
    text = (
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: a}\n"
        f"spec:\n{field}: {value}\n  demand: {{query: 'x'}}\n  capacityPerReplica: 2\n"
    )
    if "target" not in field:
        text += "  target: {name: web}\n"
    with pytest.raises(ConfigError, match="is not a"):
        parse_policies(text, "p.yaml")


def test_a_check_across_fields_names_the_field_and_its_line_without_pydantics_prefix() -> None:
    """Until 2026-12-07: "p.yaml:4: field 'spec': Value error, minReplicas (5) must not exceed ..."."""
    text = (
        "apiVersion: scaleahead.io/v1alpha1\nkind: PredictiveScalingPolicy\nmetadata: {name: a}\nspec:\n"
        "  target: {name: web}\n  demand: {query: x}\n  capacityPerReplica: 2\n  minReplicas: 5\n  maxReplicas: 2\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    said = str(err.value)
    assert "p.yaml:8: field 'spec.minReplicas': minReplicas (5) must not exceed maxReplicas (2)" in said, said
    assert "Value error" not in said
