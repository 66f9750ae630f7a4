"""``scaleahead bench replay --seeds``: the replay's outcome for each training seed of the forecaster.

The LSTM is trained for real (a small configuration, on two days of the real Alibaba trace); a
seed's row must be the replay of a forecaster trained from that seed alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from forecaster import registry
from forecaster.lstm import LSTMConfig, LSTMForecaster
from scaleahead.bench import replay as rp
from scaleahead.errors import UserError
from scaleahead.types import Series
from tests.replay.conftest import cli

POLICIES = ["scaleahead", "hpa", "oracle"]


@pytest.fixture
def small_lstm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lstm`` as a small network trained for one epoch (the registry's factory, swapped for the test)."""
    cfg = {"hidden": 8, "mlp": 16, "max_epochs": 1, "patience": 1, "max_train_windows": 400, "max_val_windows": 100}
    monkeypatch.setitem(registry._FACTORIES, "lstm", lambda: LSTMForecaster(LSTMConfig(**cfg)))


def test_each_seeds_row_is_the_replay_of_a_forecaster_trained_from_that_seed(
    alibaba_two_days: Series, small_lstm: None
) -> None:
    setup = rp.prepare(alibaba_two_days, None, 60.0)
    doc, _ = rp.run_replay(setup, POLICIES, "lstm", seed=3)
    assert doc["params"]["scaleahead_seed"] == 3
    spread = rp.seed_spread(setup, doc, [3, 5])
    assert spread["seeds"] == [3, 5] and set(spread["runs"]) == {"3", "5"} and set(spread["fit_s"]) == {"3", "5"}
    hpa, oracle, ours = doc["policies"]["hpa"], doc["policies"]["oracle"], doc["policies"]["scaleahead"]
    first = spread["runs"]["3"]
    assert first["violation_fraction"] == ours["violation_fraction"]
    assert first["replica_seconds"] == ours["replica_seconds"]
    assert first["cost_rel_hpa"] == pytest.approx(ours["replica_seconds"] / hpa["replica_seconds"])
    assert first["cost_rel_oracle"] == pytest.approx(ours["replica_seconds"] / oracle["replica_seconds"])
    # Seed 5's row is what a replay trained from seed 5 alone gives.
    alone, _ = rp.run_replay(setup, ["scaleahead"], "lstm", seed=5)
    row = spread["runs"]["5"]
    for key in ("violation_fraction", "replica_seconds", "scale_events"):
        assert row[key] == alone["policies"]["scaleahead"][key]
    # ... and another network than seed 3's: the two replays steer differently.
    assert (row["replica_seconds"], row["scale_events"]) != (first["replica_seconds"], first["scale_events"])
    summary = spread["summary"]["replica_seconds"]
    lo, hi = sorted([row["replica_seconds"], first["replica_seconds"]])
    assert (summary["min"], summary["max"]) == (lo, hi) and summary["median"] == pytest.approx((lo + hi) / 2)
    assert all(math.isfinite(v["median"]) for v in spread["summary"].values())


def test_seeds_need_a_learned_forecaster_and_the_first_seeds_document(alibaba_two_days: Series) -> None:
    setup = rp.prepare(alibaba_two_days, None, 60.0)
    with pytest.raises(UserError, match="'seasonal_naive' is fitted without a random seed"):
        rp.run_replay(setup, ["scaleahead"], "seasonal_naive", seed=1)
    doc, _ = rp.run_replay(setup, ["scaleahead", "hpa"], "seasonal_naive")
    with pytest.raises(UserError, match="--seeds applies to a learned forecaster"):
        rp.seed_spread(setup, doc, [0, 1])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--seeds", "0-2", "--model", "seasonal_naive"], "'seasonal_naive' is fitted without a random seed"),
        (["--seeds", "a-b"], "--seeds 'a-b' is not a list of seeds"),
        (["--seeds", "0-500"], "--seeds names 501 seeds"),
        (["--seeds", "0,1", "--policies", "hpa,oracle"], "leaves that policy out"),
        (["--seeds", "0,1", "--rollout", "canary", "--challenger", "lstm"], "--seeds does not apply to a --rollout"),
    ],
)
def test_bad_seeds_are_refused_before_any_training(
    alibaba_csv: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    out = tmp_path / "r.json"
    proc = cli("bench", "replay", "--trace", str(alibaba_csv), "--json", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_ratio_over_a_peers_zero_is_left_out_so_the_json_has_no_infinities() -> None:
    ours = {"violation_fraction": 0.01, "replica_seconds": 300.0, "scale_events": 4}
    peers = {"hpa": {"violation_fraction": 0.0, "replica_seconds": 200.0}, "oracle": {"replica_seconds": 100.0}}
    row = rp._seed_row(ours, peers)
    assert row == {**ours, "cost_rel_hpa": 1.5, "cost_rel_oracle": 3.0}
    assert set(rp._seed_row(ours, {})) == set(ours)
