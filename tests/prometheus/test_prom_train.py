"""`scaleahead train --prometheus`: the LSTM trains on every policy's demand read from a real Prometheus."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _policies(tmp_path, workloads: list[str]):
    text = EXAMPLE.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("query:"))
    docs = []
    for w in workloads:
        docs.append(text.replace(old, f'    query: nasa_requests{{workload="{w}"}}').replace("name: web", f"name: {w}"))
    path = tmp_path / "policies.yaml"
    path.write_text("\n---\n".join(docs))
    return path


def test_train_from_prometheus_registers_a_model_over_every_policys_series(prom, tmp_path) -> None:
    policies = _policies(tmp_path, ["web", "w01", "w02"])
    db = f"sqlite:///{tmp_path / 'a.db'}"
    out = cli(
        "train", "--prometheus", prom.url, "--policy", str(policies), "--days", "2", "--end", iso(prom.web.end),
        "--epochs", "1", "--max-minutes", "1", "--out", str(tmp_path / "models"), "--db", db, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    models = json.loads(cli("models", "list", "--db", db, "--output", "json").stdout)
    assert len(models) == 1
    assert models[0]["data_source"].startswith(f"{prom.url} (3 series)")
    assert models[0]["step_s"] == 10.0


def test_train_needs_exactly_one_source_and_a_policy_with_prometheus(prom, tmp_path) -> None:
    both = cli("train", "--trace", "nasa-10s", "--prometheus", prom.url)
    no_policy = cli("train", "--prometheus", prom.url, "--db", f"sqlite:///{tmp_path / 'b.db'}")
    assert both.returncode == no_policy.returncode == 2
    assert "exactly one of --trace and --prometheus" in both.stderr
    assert "--policy" in no_policy.stderr
    assert not (tmp_path / "b.db").exists()
