"""``bench replay --set``: flat and dotted spec overrides, and malformed ones."""

from __future__ import annotations

import pytest

from scaleahead.commands.replay import _parse_sets
from scaleahead.errors import UserError


def test_dotted_keys_reach_into_a_block_and_values_are_json() -> None:
    got = _parse_sets(
        ["forecastQuantile=0.99", "objective.sloRisk=1000", "objective.churn=300", "fallback.mode=static"]
    )
    assert got == {
        "forecastQuantile": 0.99,
        "objective": {"sloRisk": 1000, "churn": 300},
        "fallback": {"mode": "static"},
    }


@pytest.mark.parametrize("item", ["novalue", "=3", "objective=3,objective.churn=1"])
def test_a_malformed_override_is_a_clear_error(item: str) -> None:
    with pytest.raises(UserError):
        _parse_sets(item.split(","))
