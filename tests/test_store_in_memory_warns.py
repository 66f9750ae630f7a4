"""An in-memory SQLite database keeps nothing: opening one says so (until 2026-12-07 silently)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from storage import Store


def test_an_in_memory_database_is_opened_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scaleahead.storage"):
        store = Store("sqlite://")
    store.close()
    (rec,) = [r for r in caplog.records if getattr(r, "event", "") == "database_in_memory"]
    assert "is in memory: what is recorded is lost when the process exits" in rec.getMessage()
    assert "sqlite:///PATH" in rec.getMessage()


def test_a_file_database_opens_without_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scaleahead.storage"):
        store = Store(f"sqlite:///{tmp_path / 'kept.db'}")
    store.close()
    assert not [r for r in caplog.records if getattr(r, "event", "") == "database_in_memory"]
