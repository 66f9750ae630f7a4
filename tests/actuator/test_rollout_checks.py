"""What `scaleahead rollout` refuses: a learned challenger whose checkpoint does not load (as
`models promote` refuses it), outcomes too large to compare, and malformed outcome rows.

Before, `rollout promote` (and a canary's last `evaluate`) made an LSTM version without a
checkpoint the champion, which `models promote` refuses; an A/B or shadow comparison of costs near
the float limit crashed with an OverflowError traceback; and `nan` forecast errors, empty or
untrimmed workloads and rows with extra cells were taken silently.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from actuator.rollouts import (
    CanaryParams,
    Outcome,
    RolloutBook,
    ab_report,
    decide_canary,
    shadow_report,
    welch_df,
)
from forecaster.lstm import LSTMConfig, LSTMForecaster
from scaleahead.errors import UserError
from storage import Store
from tests.conftest import Cli

HEADER = "workload,arm,violation_fraction,cost_per_demand"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real checkpoint of the current format (untrained, tiny)."""
    path = tmp_path_factory.mktemp("ckpt") / "m.pt"
    LSTMForecaster.untrained(60.0, LSTMConfig(hidden=4, mlp=8, threads=1)).save(path)
    return path.read_bytes()


def _statuses(store: Store) -> dict[int, str]:
    return {m.id: m.status for m in store.models()}


def _rollouts(store: Store) -> list[tuple[int, str, float, dict]]:
    return [(r.id, r.state, r.share, r.results) for r in store.rollouts()]


# B5: the challenger's checkpoint ---------------------------------------------------------------


def test_rollout_start_refuses_a_learned_challenger_without_a_checkpoint(tmp_path: Path, cli: Cli) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    baseline = store.register_model("wm", "window_mean", status="challenger")
    lstm = store.register_model("lstm-nockpt", "lstm", status="challenger")
    code, out, err = cli(
        "rollout", "start", "--challenger", str(lstm), "--mode", "canary", "--steps", "1.0", "--db", db
    )
    assert code == 2, (out, err)
    assert f"--challenger {lstm} cannot be rolled out: Model version {lstm} has no checkpoint" in err
    assert "nothing was started" in err and "Traceback" not in err
    assert store.rollouts() == []
    # a baseline version has nothing to load: still started
    code, out, err = cli("rollout", "start", "--challenger", str(baseline), "--mode", "ab", "--db", db)
    assert code == 0, (out, err)


def test_a_challenger_given_by_its_version_name_is_that_version(tmp_path: Path, cli: Cli) -> None:
    """`models list` shows each version's name: `--challenger NAME` of one version is that version
    (checked and promoted as its id would be; a note says which); a name that two versions have is
    refused with their ids; any other name is still a policy label. Until 2026-12-06 a version's
    name was taken as a label, and promoting its rollout made no version champion (docs audit)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    wm = store.register_model("wm-one", "window_mean", status="candidate")
    nockpt = store.register_model("lstm-nockpt", "lstm", status="candidate")
    twice = [store.register_model("lstm-twice", "window_mean") for _ in range(2)]
    code, out, err = cli("rollout", "start", "--challenger", "wm-one", "--mode", "canary", "--steps", "1.0", "--db", db)
    assert code == 0, (out, err)
    assert f"--challenger 'wm-one' is model version {wm}" in err
    (r,) = store.rollouts()
    assert r.challenger == str(wm)
    code, out, err = cli("rollout", "promote", "--db", db)
    assert code == 0, (out, err)
    assert _statuses(store)[wm] == "champion"  # the version, not a label
    # the checks an id gets: a learned version without a checkpoint is refused by its name too
    code, out, err = cli("rollout", "start", "--challenger", "lstm-nockpt", "--mode", "ab", "--db", db)
    assert code == 2 and f"--challenger {nockpt} cannot be rolled out" in err, (out, err)
    code, out, err = cli("rollout", "start", "--challenger", "lstm-twice", "--mode", "ab", "--db", db)
    assert code == 2, (out, err)
    assert f"--challenger 'lstm-twice' is the name of 2 model versions ({twice[0]}, {twice[1]})" in " ".join(
        err.split()
    )
    code, out, err = cli("rollout", "start", "--challenger", "bigger-buffer", "--mode", "ab", "--db", db)
    assert code == 0 and "is model version" not in err, (out, err)
    assert max(store.rollouts(), key=lambda r: r.id).challenger == "bigger-buffer"


def test_rollout_promote_refuses_a_challenger_whose_checkpoint_went_missing_and_records_nothing(
    tmp_path: Path, checkpoint: bytes, cli: Cli
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    path = tmp_path / "new.pt"
    path.write_bytes(checkpoint)
    new = store.register_model(
        "lstm-new",
        "lstm",
        artifact_path=str(path),
        artifact_sha256=hashlib.sha256(checkpoint).hexdigest(),
        status="challenger",
    )
    code, out, err = cli("rollout", "start", "--challenger", str(new), "--mode", "canary", "--steps", "1.0", "--db", db)
    assert code == 0, (out, err)
    path.unlink()  # lost after the start
    before = (_statuses(store), _rollouts(store))
    code, out, err = cli("rollout", "promote", "--db", db)
    assert code == 2, (out, err)
    assert (
        f"Rollout 1 (group default) is not promoted: its challenger cannot be the champion: Model version {new} " in err
    )
    assert f"has no checkpoint, in the database or at {path}" in err
    assert "scaleahead rollout abort --group default" in err and "nothing was recorded" in err
    assert "[promoted]" not in out
    assert (_statuses(store), _rollouts(store)) == before
    assert before[1][0][1] == "running"
    # what `models promote` says of the same version
    code, _, models_err = cli("models", "promote", str(new), "--db", db)
    assert code == 2 and f"Model version {new} has no checkpoint" in models_err
    # the checkpoint back: promoted
    path.write_bytes(checkpoint)
    code, out, err = cli("rollout", "promote", "--db", db)
    assert code == 0 and "[promoted]" in out, (out, err)
    assert _statuses(store)[new] == "champion"


def test_a_canarys_last_evaluation_does_not_promote_a_challenger_whose_checkpoint_does_not_load(
    tmp_path: Path, checkpoint: bytes, cli: Cli
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    path = tmp_path / "new.pt"
    path.write_bytes(checkpoint[: len(checkpoint) // 2])  # truncated, and registered without a SHA-256
    new = store.register_model("lstm-new", "lstm", artifact_path=str(path), status="challenger")
    # started (by the library, as retraining does) a window ago with one step: the next evaluation decides
    RolloutBook(store).start("default", "canary", "default", str(new), time.time() - 7200, canary=CanaryParams((0.5,)))
    csv = tmp_path / "o.csv"
    csv.write_text(
        f"{HEADER}\na,champion,0.1,1\nb,champion,0.1,1\ne,champion,0.1,1\n"
        "c,challenger,0.1,1\nd,challenger,0.1,1\nf,challenger,0.1,1\n"
    )  # three per arm: a t interval's minimum
    before = (_statuses(store), _rollouts(store))
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db)
    assert code == 2, (out, err)
    assert "Rollout 1 (group default) is not promoted: the canary held up at its last step, but" in err
    assert f"its checkpoint file {path} does not load" in err and "(nor this evaluation)" in err
    assert "Traceback" not in err
    assert (_statuses(store), _rollouts(store)) == before
    path.write_bytes(checkpoint)
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db)
    assert code == 0 and "[promoted]" in out, (out, err)
    assert _statuses(store)[new] == "champion"


def test_the_promotion_check_runs_before_anything_is_recorded_in_the_book(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    new = store.register_model("lstm-b", "lstm")
    book = RolloutBook(store)
    book.start("g", "shadow", "default", str(new), 1.0)
    before = (_statuses(store), _rollouts(store))

    def refuse(r):  # type: ignore[no-untyped-def]
        raise UserError("refused")

    with pytest.raises(UserError, match="refused"):
        book.promote("g", 2.0, check=refuse)
    assert (_statuses(store), _rollouts(store)) == before and before[1][0][1] == "running"


# B7: outcomes near the float limit -------------------------------------------------------------


def test_ab_and_shadow_reports_of_values_near_the_float_limit_are_computed_without_overflow() -> None:
    champ = [Outcome("w0", 0.1, 0.0), Outcome("w2", 0.1, 1e160)]
    chal = [Outcome("w1", 0.1, 1.0), Outcome("w3", 0.1, 1.0)]
    cost = {d.metric: d for d in ab_report(champ, chal)}["cost_per_demand"]
    assert cost.champion == pytest.approx(5e159) and cost.challenger == pytest.approx(1.0)
    assert cost.difference == pytest.approx(-5e159)
    # Welch with one arm constant: df = 1, t = 12.706, se = 5e159
    assert cost.high == pytest.approx(-5e159 + 12.7062 * 5e159, rel=1e-4) and not cost.significant
    paired = shadow_report(
        [Outcome("w0", 0.1, 0.0), Outcome("w1", 0.1, 1.0)], [Outcome("w0", 0.1, 1e200), Outcome("w1", 0.1, 1.0)]
    )
    d = {x.metric: x for x in paired}["cost_per_demand"]
    assert d.difference == pytest.approx(5e199) and d.challenger == pytest.approx(5e199)
    # the interval of 1e308 values overflows: reported as such, never an exception
    edge = ab_report(
        [Outcome("a", 0.0, 0.0), Outcome("b", 0.0, 1e308)], [Outcome("c", 0.0, 0.0), Outcome("d", 0.0, 1e308)]
    )
    e = {x.metric: x for x in edge}["cost_per_demand"]
    assert e.champion == pytest.approx(5e307) and e.difference == 0.0 and e.high == float("inf")
    # tiny values: the squares in the Welch degrees of freedom do not underflow to 0/0
    assert welch_df(1e-320, 2, 0.0, 2) == pytest.approx(1.0)


def test_a_canary_decides_on_costs_near_the_float_limit() -> None:
    champ = [Outcome("a", 0.0, 1e308), Outcome("b", 0.0, 1e308), Outcome("e", 0.0, 1e308)]
    chal = [Outcome("c", 0.0, 1e308), Outcome("d", 0.0, 1e308), Outcome("f", 0.0, 1e308)]
    d = decide_canary(CanaryParams((0.5, 1.0)), 0.5, champ, chal)
    assert d.action == "promote" and d.summary["champion_cost_per_demand"] == pytest.approx(1e308)


def _started(tmp_path: Path, cli: Cli, mode: str) -> tuple[str, Store]:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    model = store.register_model("wm", "window_mean", status="challenger")
    code, out, err = cli("rollout", "start", "--challenger", str(model), "--mode", mode, "--db", db)
    assert code == 0, (out, err)
    return db, store


@pytest.mark.parametrize("mode", ["ab", "shadow"])
def test_evaluate_refuses_outcomes_too_large_to_compare_naming_the_column_and_lines(
    tmp_path: Path, cli: Cli, mode: str
) -> None:
    db, store = _started(tmp_path, cli, mode)
    csv = tmp_path / "edge.csv"
    if mode == "ab":
        csv.write_text(
            f"{HEADER}\nweb0,champion,-0.0,0\nweb2,champion,0,1e308\nweb1,challenger,1e-320,0\nweb3,challenger,0,1e308\n"
        )
    else:
        csv.write_text(f"{HEADER}\nw0,champion,0,0\nw0,challenger,0,1e308\nw1,champion,0,1e308\nw1,challenger,0,0\n")
    before = _rollouts(store)
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db)
    assert code == 2, (out, err)
    lines = "lines 3, 5" if mode == "ab" else "lines 3, 4"
    assert f"{csv}: the outcomes are too large to compare" in err
    assert f"cost_per_demand (largest 1e+308, on {lines})" in err and "nothing was recorded" in err
    assert "Traceback" not in err and "OverflowError" not in err
    assert _rollouts(store) == before
    # 1e160 is compared (finite), and recorded
    csv.write_text(f"{HEADER}\nw0,champion,0.1,0\nw2,champion,0.1,1e160\nw1,challenger,0.1,1\nw3,challenger,0.1,1\n")
    if mode == "shadow":
        csv.write_text(
            f"{HEADER}\nw0,champion,0.1,0\nw0,challenger,0.1,1e160\nw1,champion,0.1,1\nw1,challenger,0.1,1\n"
        )
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db, "--output", "json")
    assert code == 0, (out, err)
    assert "cost_per_demand" in [d["metric"] for d in store.rollouts()[0].results["last"]["differences"]]


# B8: malformed outcome rows --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            "workload,arm,violation_fraction,cost_per_demand,forecast_error\n"
            "a,champion,0.1,1,0.5\nb,champion,0.1,1,NaN\nc,challenger,0.1,1,-nan\nd,challenger,0.1,1,0.5\n",
            ":3: forecast_error NaN is not a finite number >= 0",
        ),
        (f"{HEADER}\nx,champion,0.1,1\n ,champion,0.2,1\ny,challenger,0.1,1\n", ":3: the workload cell is empty"),
        (f"{HEADER}\n,champion,0.1,1\nx,challenger,0.1,1\n", ":2: the workload cell is empty"),
        (
            f"{HEADER}\nweb0,champion,0.1,1\nweb0 ,champion,0.9,1\nweb1,challenger,0.1,1\n web1,challenger,0.1,1\n",
            "a workload is listed more than once in one arm: web0 in the champion arm on lines 2, 3; "
            "web1 in the challenger arm on lines 4, 5",
        ),
        (
            f"{HEADER}\nweb0,champion,0.1,1,EXTRA,9\nweb2,champion,0.1,1\nweb1,challenger,0.1,1\n",
            ":2: the row has more cells than the header (6 cells; the header has 4): EXTRA,9 would be ignored",
        ),
    ],
    ids=["nan-forecast-error", "blank-workload", "empty-workload", "untrimmed-duplicate", "extra-cells"],
)
def test_evaluate_refuses_malformed_rows_with_their_line_and_records_nothing(
    tmp_path: Path, cli: Cli, body: str, says: str
) -> None:
    db, store = _started(tmp_path, cli, "ab")
    csv = tmp_path / "o.csv"
    csv.write_text(body)
    before = _rollouts(store)
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db)
    assert code == 2, (out, err)
    assert says in err and "Traceback" not in err
    assert _rollouts(store) == before


def test_an_empty_forecast_error_is_unknown_and_a_trimmed_workload_is_the_same_workload(
    tmp_path: Path, cli: Cli
) -> None:
    db, store = _started(tmp_path, cli, "ab")
    csv = tmp_path / "o.csv"
    csv.write_text(
        "workload,arm,violation_fraction,cost_per_demand,forecast_error\n"
        " a ,champion,0.1,1,\nb,champion,0.2,1, \nc,challenger,0.1,1,\nd,challenger,0.3,1,\n"
    )
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db, "--output", "json")
    assert code == 0, (out, err)
    metrics = [d["metric"] for d in store.rollouts()[0].results["last"]["differences"]]
    assert metrics == ["violation_fraction", "cost_per_demand"]


def test_a_trailing_comma_on_every_row_is_not_an_extra_cell(tmp_path: Path, cli: Cli) -> None:
    """Spreadsheets export rows ending in a comma: the empty cell after it holds nothing (found in
    review: the stricter reader refused such files, which were read before)."""
    db, store = _started(tmp_path, cli, "ab")
    csv = tmp_path / "o.csv"
    rows = "a,champion,0.1,1,\r\nb,champion,0.2,1,\r\nc,challenger,0.1,1, \r\nd,challenger,0.3,1,\r\n"
    csv.write_text(f"{HEADER}\r\n{rows}")
    code, out, err = cli("rollout", "evaluate", "--outcomes", str(csv), "--db", db, "--output", "json")
    assert code == 0, (out, err)
    last = store.rollouts()[0].results["last"]
    assert {d["metric"] for d in last["differences"]} == {"violation_fraction", "cost_per_demand"}, last


def test_a_challenger_loaded_from_its_stored_copy_is_started_with_a_note_on_stderr(
    tmp_path: Path, checkpoint: bytes, cli: Cli
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    path = tmp_path / "gone.pt"  # never written: the daemon loads the copy stored in the database
    new = store.register_model("lstm-new", "lstm", artifact_path=str(path), artifact=checkpoint, status="challenger")
    code, out, err = cli("rollout", "start", "--challenger", str(new), "--mode", "ab", "--output", "json", "--db", db)
    assert code == 0, (out, err)
    assert json.loads(out)["challenger"] == str(new)
    assert f"note: the checkpoint file {path} is missing; the daemon loads the intact copy" in err


def test_outcomes_of_a_rollout_without_a_whole_bucket_say_none_yet(tmp_path: Path, cli: Cli) -> None:
    """Right after the start no 5-minute bucket has ended: the window is "none yet" with when the
    first ends (it printed a start after its end)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    mid = Store(db).register_model("wm", "window_mean", status="candidate")
    assert cli("rollout", "start", "--challenger", str(mid), "--mode", "ab", "--db", db)[0] == 0
    code, out, err = cli("rollout", "outcomes", "--output", "table", "--db", db)
    said = " ".join(out.split())
    assert code == 0, (out, err)
    assert "outcomes measured none yet (the first whole 5-minute bucket ends at" in said, said


# The champion a rollout is measured against (an operator audit) --------------------------------


def test_the_default_champion_is_the_challengers_familys_and_a_champion_is_no_challenger(
    tmp_path: Path, cli: Cli
) -> None:
    """Until 2026-12-07 the default champion was the newest champion of any family: a baseline's
    version rolled out while the LSTM ran in production had the LSTM as its champion, and its
    promotion retired the LSTM (the fleet fell back to a baseline)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    old_sn = store.register_model("sn-1", "seasonal_naive", status="challenger")
    store.make_champion(old_sn)
    wm = store.register_model("wm-1", "window_mean", status="challenger")
    store.make_champion(wm)  # the newest champion, of another family
    new_sn = store.register_model("sn-2", "seasonal_naive", status="challenger")
    code, out, err = cli("rollout", "start", "--challenger", str(old_sn), "--mode", "canary", "--db", db)
    assert code == 2 and f"--challenger {old_sn} is already a champion (of seasonal_naive)" in err, err
    code, out, err = cli(
        "rollout", "start", "--challenger", str(new_sn), "--mode", "shadow", "--db", db, "--output", "json"
    )
    assert code == 0, err
    assert (json.loads(out)["champion"], json.loads(out)["challenger"]) == (str(old_sn), str(new_sn))
    assert cli("rollout", "promote", "--db", db)[0] == 0
    assert _statuses(store) == {old_sn: "retired", wm: "champion", new_sn: "champion"}
    # a family with no champion of its own, beside two others' champions: the operator names it
    nv = store.register_model("naive-1", "naive", status="challenger")
    code, out, err = cli("rollout", "start", "--challenger", str(nv), "--mode", "canary", "--db", db)
    assert code == 2 and "--champion is needed: the challenger's family (naive) has no champion" in err, err
    assert [r.state for r in store.rollouts()] == ["promoted"]
    code, out, err = cli(
        "rollout", "start", "--challenger", str(nv), "--mode", "canary", "--champion", str(wm), "--db", db
    )
    assert code == 0, err


def test_a_mistyped_group_is_told_with_the_groups_there_are_and_a_rollouts_challenger_is_not_promoted_alone(
    tmp_path: Path, cli: Cli
) -> None:
    """An operator audit: `rollout status --group defualt` said to start a rollout there, and
    `rollout start` in it said nothing (its promotion still changes the champion of every workload);
    `models promote` of a running rollout's challenger left the rollout comparing it with itself."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    wm = store.register_model("wm-1", "window_mean", status="challenger")
    code, out, err = cli("rollout", "start", "--challenger", str(wm), "--mode", "shadow", "--db", db)
    assert code == 0 and "has had no rollout before" not in err, err  # the first rollout: nothing to compare
    code, out, err = cli("rollout", "status", "--group", "defualt", "--db", db)
    assert code == 2 and "No rollout in group 'defualt'. Groups with rollouts: default." in err, err
    code, out, err = cli("models", "promote", str(wm), "--db", db)
    assert code == 2 and f"Model version {wm} is the challenger of the running rollout 1 (group default)" in err
    assert "rollout promote --group default" in err and store.model(wm).status == "challenger"
    assert cli("rollout", "abort", "--db", db)[0] == 0
    code, out, err = cli(
        "rollout", "start", "--challenger", str(wm), "--mode", "shadow", "--group", "defualt", "--db", db
    )
    assert code == 0 and "note: group 'defualt' has had no rollout before (groups with rollouts: default)" in err, err


def test_measured_outcomes_on_another_clock_are_named_not_blamed_on_the_daemon(tmp_path: Path, cli: Cli) -> None:
    """An operator audit: a `run --virtual` recorded a rollout's outcomes at the trace's time, and
    `evaluate --measured` (wall clock) asked whether the daemon was running."""
    from tests.test_storage_outcomes import _row

    db = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(db)
    wm = store.register_model("wm-1", "window_mean", status="challenger")
    assert cli("rollout", "start", "--challenger", str(wm), "--mode", "ab", "--db", db)[0] == 0
    code, out, err = cli("rollout", "evaluate", "--measured", "--db", db)
    assert code == 2 and "has no measured outcomes yet" in err, err  # none at all: as before
    july_1995 = 804_556_800.0
    store.record_outcomes(
        [_row("Deployment/default/web", july_1995 + 300.0 * i, 1, "champion", steps=30) for i in range(3)]
    )
    code, out, err = cli("rollout", "evaluate", "--measured", "--db", db)
    assert code == 2, err
    assert (
        "but 3 outcome row(s) of it are recorded, for buckets from 1995-07-01T00:00:00Z to 1995-07-01T00:10:00Z" in err
    )
    assert "written by a run on another clock" in err and "EVALUATE_CANARIES" in err
