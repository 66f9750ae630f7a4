"""`train`, `models list|show`, `bench forecast` and `report`, through the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scaleahead.types import Forecast, WorkloadRef
from tests.forecaster.conftest import daily_series


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    import os

    env.update({k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "SCALEAHEAD_TRACES", "HOME")})
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", *args], capture_output=True, text=True, timeout=600, env=env
    )


@pytest.fixture(scope="module")
def csv_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two days at 60 s as a generic series CSV (empty cells are missing data)."""
    s = daily_series(days=2.0)
    path = tmp_path_factory.mktemp("trace") / "demand.csv"
    lines = ["timestamp,value"]
    for t, v in zip(s.times(), s.values, strict=True):
        lines.append(f"{int(t)},{'' if np.isnan(v) else f'{v:.3f}'}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_train_registers_the_model_with_span_hyperparameters_metrics_and_artifact(
    csv_trace: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out = run("train", "--trace", str(csv_trace), "--db", db, "--out", str(tmp_path / "m"), "--epochs", "1")
    assert out.returncode == 0, out.stderr
    assert "model 1 registered" in out.stdout
    listed = json.loads(run("models", "list", "--db", db, "--output", "json").stdout)
    assert len(listed) == 1
    m = listed[0]
    assert m["family"] == "lstm"
    assert m["step_s"] == 60.0
    assert m["data_start"] == pytest.approx(daily_series().start)
    assert m["data_end"] == pytest.approx(daily_series().start + 0.75 * 2 * 86400)  # the history split only
    assert m["hyperparams"]["max_epochs"] == 1
    assert m["metrics"]["epochs"] >= 1
    assert len(m["artifact_sha256"]) == 64
    shown = json.loads(run("models", "show", "1", "--db", db).stdout)
    assert shown["artifact_ok"] is True
    Path(shown["artifact_path"]).write_bytes(b"tampered")
    assert json.loads(run("models", "show", "1", "--db", db).stdout)["artifact_ok"] is False


@pytest.mark.slow
def test_train_model_lstm_clock_registers_a_clock_family_with_its_period(csv_trace: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    args = ("--db", db, "--out", str(tmp_path / "m"), "--epochs", "1", "--model", "lstm_clock")
    out = run("train", "--trace", str(csv_trace), *args)
    assert out.returncode == 0, out.stderr
    m = json.loads(run("models", "list", "--db", db, "--output", "json").stdout)[0]
    assert m["family"] == "lstm_clock" and m["name"].startswith("lstm-clock-")
    assert m["hyperparams"]["clock_period_s"] == 300.0
    assert Path(m["artifact_path"]).name.startswith("lstm-clock-")


def test_showing_an_unknown_model_is_a_clear_error(tmp_path: Path) -> None:
    from storage import Store

    Store(f"sqlite:///{tmp_path / 'e.db'}").close()  # an empty registry (a missing file is its own error)
    out = run("models", "show", "7", "--db", f"sqlite:///{tmp_path / 'e.db'}")
    assert out.returncode == 2
    assert "No model version 7" in out.stderr


@pytest.mark.slow
def test_bench_forecast_scores_every_model_on_the_same_origins_and_writes_section_7_json(
    csv_trace: Path, tmp_path: Path
) -> None:
    js, npz = tmp_path / "b.json", tmp_path / "b.npz"
    out = run(
        "bench", "forecast", "--trace", str(csv_trace), "--json", str(js), "--save-forecasts", str(npz),
        "--models", "naive,seasonal_naive,window_mean,ridge,lstm", "--epochs", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(js.read_text())
    assert doc["trace"] == str(csv_trace)
    assert doc["resolution_s"] == 60.0
    assert {"history_start", "test_start", "end"} <= doc["split"].keys()
    assert doc["params"]["epochs"] == 1
    assert set(doc["models"]) == {"naive", "seasonal_naive", "window_mean", "ridge", "lstm"}
    points = {m["scored_points"] for m in doc["models"].values()}
    assert len(points) == 1  # same origins, same scored steps for every model
    for m in doc["models"].values():
        assert {"mae", "rel_mae", "wql", "coverage_q90", "mae_by_step"} <= m.keys()
        assert len(m["mae_by_step"]) == 15
        assert 0 <= m["coverage_q90"] <= 1
    assert doc["models"]["seasonal_naive"]["rel_mae"] == pytest.approx(1.0)
    # The report: self-contained HTML with embedded PNGs and the per-workload table.
    html_path = tmp_path / "r.html"
    out = run("report", "--bench", str(js), "--forecasts", str(npz), "--out", str(html_path))
    assert out.returncode == 0, out.stderr
    html = html_path.read_text()
    assert html.count("data:image/png;base64,") >= 3  # MAE by step, calibration, at least one fan
    assert "coverage_q90" in html
    assert "<td>lstm</td>" in html
    assert 'src="http' not in html  # nothing loaded from the network
    # Another run's forecasts (here: fewer origins) with this JSON: refused, not drawn under its name.
    other = tmp_path / "other.npz"
    z = dict(np.load(npz))
    np.savez(other, **{k: v[:-1] for k, v in z.items()})
    mixed = run("report", "--bench", str(js), "--forecasts", str(other), "--out", str(tmp_path / "m.html"))
    assert mixed.returncode == 2 and "not from the same `bench forecast` run" in mixed.stderr
    # The --json file given as --forecasts: named as such (was numpy's advice to allow pickles).
    swapped = run("report", "--bench", str(js), "--forecasts", str(js), "--out", str(tmp_path / "s.html"))
    assert swapped.returncode == 2 and "not an .npz of arrays" in swapped.stderr, swapped.stderr
    assert "allow_pickle" not in swapped.stderr and "not its --json file" in swapped.stderr


def test_report_compares_forecasts_stored_during_operation_with_the_actual_trace(
    csv_trace: Path, tmp_path: Path
) -> None:
    from forecaster.baselines import WindowMean
    from storage import Store

    db = f"sqlite:///{tmp_path / 'op.db'}"
    store = Store(db)
    s = daily_series(days=2.0)
    model = WindowMean().fit([s.between(s.start, s.start + 86400)])
    ref = WorkloadRef("Deployment", "shop", "web")
    fcs: list[Forecast] = []
    for k in range(40):
        t = s.start + 86400 + k * 600.0
        fcs.append(model.forecast(ref, s, t, 15))
    store.record_forecasts(fcs, force=True)
    html_path = tmp_path / "op.html"
    out = run("report", "--db", db, "--trace", str(csv_trace), "--out", str(html_path))
    assert out.returncode == 0, out.stderr
    html = html_path.read_text()
    assert "Deployment/shop/web" in html
    assert "window_mean" in html
    assert html.count("data:image/png;base64,") >= 3
    # A second workload's forecasts: one trace is one workload's demand, so it must be named.
    other = WorkloadRef("Deployment", "shop", "api")
    store.record_forecasts([model.forecast(other, s, s.start + 86400 + k * 600.0, 15) for k in range(5)], force=True)
    both = run("report", "--db", db, "--trace", str(csv_trace), "--out", str(tmp_path / "both.html"))
    assert both.returncode == 2 and "holds forecasts of 2 workloads" in both.stderr and "--workload" in both.stderr
    named = run(
        "report", "--db", db, "--trace", str(csv_trace), "--workload", "Deployment/shop/web", "--out", str(html_path)
    )
    assert named.returncode == 0, named.stderr


@pytest.mark.slow
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = run("bench", "forecast", "--trace", "no-such-trace", "--json", str(tmp_path / "x.json"))
    assert out.returncode == 2
    assert "Unknown trace" in out.stderr
    assert not (tmp_path / "x.json").exists()
    out = run("report", "--out", str(tmp_path / "r.html"))
    assert out.returncode == 2
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--epochs", "0"], "--epochs 0 would train nothing"),
        (["--threads", "0"], "--threads 0 is not a thread count"),
        (["--max-minutes", "0"], "--max-minutes 0 leaves no time to train"),
        (["--model", "ridge"], "--model 'ridge' is not a learned model"),
    ],
)
def test_train_refuses_settings_that_cannot_train_and_registers_nothing(
    csv_trace: Path, tmp_path: Path, option: list[str], says: str
) -> None:
    db = tmp_path / "m.db"
    out = run("train", "--trace", str(csv_trace), "--db", f"sqlite:///{db}", "--out", str(tmp_path / "ck"), *option)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "ck").exists() or not any((tmp_path / "ck").iterdir())


def test_a_model_that_cannot_train_on_a_short_trace_is_reported_not_dropped() -> None:
    from scaleahead.bench import forecast as fb

    s = daily_series(days=0.2, step_s=300.0)  # 57 steps of 5 min: too few windows for the LSTM
    result = fb.run(s, "short", ["seasonal_naive", "naive", "lstm"])
    assert "Too little usable history" in result.models["lstm"]["error"]
    assert result.models["naive"]["wql"] > 0
    assert "error" not in result.to_json()["models"]["naive"]
