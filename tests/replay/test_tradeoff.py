"""``scaleahead bench replay-tradeoff``: the curves, the default point, the rate oracle, validation mode."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import cli


def test_the_tradeoff_has_the_default_each_curve_the_references_and_the_rate_oracle(
    alibaba_csv: Path, tmp_path: Path
) -> None:
    out, png = tmp_path / "t.json", tmp_path / "t.png"
    proc = cli(
        "bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(out), "--plot", str(png),
        "--model", "naive", "--slo-risks", "10,1000", "--quantiles", "0.9", "--utilizations", "1.0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    settings = [p["settings"] for p in doc["points"]]
    assert settings == [
        {},
        {"objective": {"sloRisk": 10.0}},
        {"objective": {"sloRisk": 1000.0}},
        {"forecastQuantile": 0.9},
        {"targetUtilization": 1.0},
    ]
    by = {json.dumps(p["settings"], sort_keys=True): p for p in doc["points"]}
    cheap, safe = by['{"objective": {"sloRisk": 10.0}}'], by['{"objective": {"sloRisk": 1000.0}}']
    # More weight on running short buys fewer violations with more replicas.
    assert safe["replica_seconds"] > cheap["replica_seconds"]
    assert safe["violation_fraction"] <= cheap["violation_fraction"]
    assert set(doc["references"]) == {"hpa", "oracle"}
    bound = doc["rate_oracle"]
    assert [b["p"] for b in bound] == sorted((b["p"] for b in bound), reverse=True)
    costs = [b["replica_seconds"] for b in bound]
    assert costs == sorted(costs)
    assert all(b["replica_seconds"] >= doc["references"]["oracle"]["replica_seconds"] for b in bound)
    assert doc["validation"] is False
    assert png.stat().st_size > 10_000
    assert "rate oracle, p 0.01" in proc.stdout


def test_validation_mode_replays_the_history_not_the_test_period(alibaba_csv: Path, tmp_path: Path) -> None:
    test_run, val_run = tmp_path / "t.json", tmp_path / "v.json"
    args = ["--model", "naive", "--slo-risks", "1000", "--quantiles", "", "--utilizations", "", "--no-bound"]
    assert cli("bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(test_run), *args).returncode == 0
    proc = cli("bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(val_run), "--validation", *args)
    assert proc.returncode == 0, proc.stderr
    t, v = json.loads(test_run.read_text()), json.loads(val_run.read_text())
    assert v["validation"] is True and "rate_oracle" not in v
    # A different span: the oracle's cost differs, and the validation span is shorter than the history.
    assert v["references"]["oracle"]["scored_steps"] != t["references"]["oracle"]["scored_steps"]


def test_a_malformed_list_is_one_clear_error_and_nothing_is_written(alibaba_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = cli("bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(out), "--slo-risks", "a,b")
    assert proc.returncode == 2
    assert "--slo-risks" in proc.stderr
    assert not out.exists()


def test_long_validation_replays_the_second_half_of_the_history(alibaba_csv: Path, tmp_path: Path) -> None:
    test_run, long_run = tmp_path / "t.json", tmp_path / "l.json"
    args = ["--model", "naive", "--slo-risks", "1000", "--quantiles", "", "--utilizations", "", "--no-bound"]
    assert cli("bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(test_run), *args).returncode == 0
    proc = cli(
        "bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(long_run), "--long-validation", *args
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    t, lv = json.loads(test_run.read_text()), json.loads(long_run.read_text())
    assert lv["validation"] is True and lv["validation_span"].startswith("whole history")
    # The history is 3 x the test period, so its second half is 1.5 x as long.
    steps_t = t["references"]["oracle"]["scored_steps"]
    assert abs(lv["references"]["oracle"]["scored_steps"] - 1.5 * steps_t) <= 2


def test_both_validation_spans_at_once_is_a_clear_error(alibaba_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = cli(
        "bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(out), "--validation", "--long-validation"
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Give one of them" in proc.stderr
    assert not out.exists()


def test_a_rolling_day_replays_one_day_of_the_history_fitted_on_all_before_it(tmp_path: Path) -> None:
    args = ["--model", "naive", "--slo-risks", "", "--quantiles", "", "--utilizations", "", "--no-bound"]
    docs = {}
    for day in (1, 2):
        out = tmp_path / f"d{day}.json"
        trace = ("--trace", "alibaba-cpu-10s", "--json", str(out))
        proc = cli("bench", "replay-tradeoff", *trace, "--rolling-day", str(day), *args)
        assert proc.returncode == 0, proc.stderr
        docs[day] = json.loads(out.read_text())
    for day, doc in docs.items():
        assert doc["validation"] is True and doc["validation_span"].startswith(f"day {day} before the test period")
        assert doc["references"]["oracle"]["scored_steps"] == 8640  # one day of 10 s steps
    # different days: the HPA on the same rule spends differently
    assert docs[1]["references"]["hpa"]["replica_seconds"] != docs[2]["references"]["hpa"]["replica_seconds"]


def test_a_rolling_day_without_two_days_before_it_is_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = cli("bench", "replay-tradeoff", "--trace", "alibaba-cpu-10s", "--json", str(out), "--rolling-day", "5")
    assert proc.returncode == 2
    assert "the history has 6.0 days" in proc.stderr and "from 1 to 4" in proc.stderr
    assert not out.exists()
    proc = cli("bench", "replay-tradeoff", "--trace", "alibaba-cpu-10s", "--json", str(out), "--rolling-day", "1",
               "--long-validation")  # fmt: skip
    assert proc.returncode == 2 and "Give one of them" in proc.stderr


def test_a_range_of_rolling_days_adds_the_days_up_at_one_capacity(tmp_path: Path) -> None:
    args = ["--model", "naive", "--slo-risks", "", "--quantiles", "", "--utilizations", "", "--no-bound"]
    out = tmp_path / "r.json"
    proc = cli(
        "bench", "replay-tradeoff", "--trace", "alibaba-cpu-10s", "--json", str(out), "--rolling-day", "1-2", *args
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["validation_span"].startswith("days 1-2 before the test period")
    assert set(doc["days"]) == {"1", "2"}
    for name in ("hpa", "oracle"):
        total = doc["references"][name]
        parts = [doc["days"][d]["references"][name] for d in ("1", "2")]
        assert total["scored_steps"] == sum(p["scored_steps"] for p in parts) == 2 * 8640
        assert total["replica_seconds"] == sum(p["replica_seconds"] for p in parts)
        short = sum(round(p["violation_fraction"] * p["scored_steps"]) for p in parts)
        assert round(total["violation_fraction"] * total["scored_steps"]) == short
    (point,) = doc["points"]
    assert point["scored_steps"] == 2 * 8640
    for bad in ("0", "3-1", "1-x", "-2"):
        proc = cli("bench", "replay-tradeoff", "--trace", "alibaba-cpu-10s", "--json", str(out), "--rolling-day", bad)
        assert proc.returncode == 2 and "--rolling-day" in proc.stderr and "Traceback" not in proc.stderr, bad


def test_set_overrides_the_policy_at_every_point_under_each_points_setting(alibaba_csv: Path, tmp_path: Path) -> None:
    plain, wide = tmp_path / "p.json", tmp_path / "w.json"
    args = ["--model", "naive", "--slo-risks", "1000", "--quantiles", "", "--utilizations", "", "--no-bound"]
    assert cli("bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(plain), *args).returncode == 0
    proc = cli(
        "bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(wide), *args,
        "--set", "targetUtilization=0.5", "--set", "objective.riskAdaptation.enabled=false",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    p, w = json.loads(plain.read_text()), json.loads(wide.read_text())
    assert w["params"]["set"] == {"targetUtilization": 0.5, "objective": {"riskAdaptation": {"enabled": False}}}
    assert [pt["settings"] for pt in w["points"]] == [pt["settings"] for pt in p["points"]]
    for before, after in zip(p["points"], w["points"], strict=True):
        # Half the target utilization: every point, the sloRisk 1000 one included, pays more.
        assert after["replica_seconds"] > 1.3 * before["replica_seconds"]
    assert w["references"] == p["references"]


def test_a_bad_set_is_one_clear_error_before_fitting(alibaba_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = cli(
        "bench", "replay-tradeoff", "--trace", str(alibaba_csv), "--json", str(out), "--set", "rampFloor.minTStat=0"
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--set" in proc.stderr and "minTStat" in proc.stderr
    assert not out.exists()
