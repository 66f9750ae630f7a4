"""Process settings that used to fail late: an unknown log level was a traceback at start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaleahead.errors import ConfigError
from scaleahead.settings import LogSettings, Settings

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"


@pytest.mark.parametrize(("given", "level"), [("debug", "DEBUG"), ("Warning", "WARNING"), (" error ", "ERROR")])
def test_a_log_level_is_any_case_of_a_python_logging_name(given: str, level: str) -> None:
    assert Settings.from_env({"SCALEAHEAD_LOG__LEVEL": given}).log.level == level


def test_the_default_log_level_is_info() -> None:
    assert LogSettings().level == "INFO"


def test_an_unknown_log_level_names_the_variable_and_the_levels() -> None:
    with pytest.raises(
        ConfigError, match=r"SCALEAHEAD_LOG__LEVEL='LOUD': .*'LOUD' is not a log level: use DEBUG, INFO, WARNING"
    ):
        Settings.from_env({"SCALEAHEAD_LOG__LEVEL": "LOUD"})


def test_run_with_an_unknown_log_level_exits_2_without_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    env = {"SCALEAHEAD_LOG__LEVEL": "LOUD", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "run", "--once", "--dry-run", "--policies", str(EXAMPLE)]
        + ["--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "SCALEAHEAD_LOG__LEVEL='LOUD'" in proc.stderr
    assert not db.exists()


def test_a_lease_no_longer_than_a_request_timeout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # A write starts only with a request timeout of the lease left: such a leader would never write.
    monkeypatch.setenv("SCALEAHEAD_ACTUATION__LEASE_DURATION_S", "10")
    says = "SCALEAHEAD_ACTUATION__LEASE_DURATION_S: lease_duration_s \\(10\\) must be more"
    with pytest.raises(ConfigError, match=says):
        Settings.from_env()
    monkeypatch.setenv("SCALEAHEAD_ACTUATION__REQUEST_TIMEOUT_S", "5")
    assert Settings.from_env().actuation.lease_duration_s == 10
