"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

import pytest

from scaleahead.prometheus.client import batchable

# PB04: a query whose string never ends is not batchable even when its brackets balance


@pytest.mark.parametrize("query", ['sum(x) or "abc', "vector(1) or `x", "sum(x) + 'y"])
def test_an_unterminated_string_outside_any_bracket_is_not_batchable(query):
    assert batchable(query) is False
