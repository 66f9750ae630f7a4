"""Rollouts: the pure decision logic, its state in storage across restarts, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actuator.rollouts import (
    CanaryParams,
    Outcome,
    RolloutBook,
    ab_report,
    assign,
    decide_canary,
    shadow_report,
    split_outcomes,
)
from scaleahead.errors import UserError
from storage import Store

T0 = 1_700_000_000.0


def outcomes(prefix: str, n: int, viol: float, cost: float, err: float = 1.0, seed: int = 0) -> list[Outcome]:
    rng = np.random.default_rng(seed)
    return [
        Outcome(f"{prefix}{i}", max(0.0, viol + rng.normal(0, viol / 10 + 1e-4)), cost * (1 + rng.normal(0, 0.01)), err)
        for i in range(n)
    ]


def test_assignment_is_stable_and_raising_the_share_only_moves_workloads_to_the_challenger():
    names = [f"Deployment/default/w{i}" for i in range(400)]
    at10 = {n for n in names if assign(n, 0.10, "s") == "challenger"}
    at50 = {n for n in names if assign(n, 0.50, "s") == "challenger"}
    assert at10 <= at50
    assert 20 <= len(at10) <= 60 and 160 <= len(at50) <= 240
    assert at10 == {n for n in names if assign(n, 0.10, "s") == "challenger"}
    assert all(assign(n, 1.0, "s") == "challenger" for n in names)
    assert all(assign(n, 0.0, "s") == "champion" for n in names)


def test_a_canary_no_worse_than_the_champion_advances_step_by_step_then_promotes():
    p = CanaryParams(steps=(0.1, 0.5, 1.0))
    champ, chal = outcomes("a", 20, 0.01, 2.0), outcomes("b", 5, 0.008, 1.9)
    d = decide_canary(p, 0.1, champ, chal)
    assert (d.action, d.share) == ("advance", 0.5) and "shown no worse" in d.reason
    # the last step below 100 % promotes: no window at 100 % is compared with an earlier champion window
    assert decide_canary(p, 0.5, champ, chal).action == "promote"
    at_100 = decide_canary(p, 1.0, [], chal)
    assert at_100.action == "wait" and "promote or abort it by hand" in at_100.reason


def test_a_canary_with_more_violations_is_rolled_back_with_the_numbers_in_the_reason():
    d = decide_canary(CanaryParams(), 0.25, outcomes("a", 10, 0.01, 2.0), outcomes("b", 4, 0.05, 1.5))
    assert d.action == "rollback" and d.share == 0.0
    assert "violates the SLO more" in d.reason


def test_a_cheaper_looking_canary_that_costs_more_per_demand_or_forecasts_worse_is_rolled_back():
    costly = decide_canary(CanaryParams(), 0.25, outcomes("a", 10, 0.01, 2.0), outcomes("b", 4, 0.01, 2.3))
    assert costly.action == "rollback" and "costs more" in costly.reason
    worse = decide_canary(CanaryParams(), 0.25, outcomes("a", 10, 0.01, 2.0, 1.0), outcomes("b", 4, 0.01, 2.0, 1.2))
    assert worse.action == "rollback" and "forecasts worse" in worse.reason


def test_a_step_with_too_few_challenger_workloads_advances_without_a_comparison_and_never_promotes_on_it():
    # until 2026-12-06 it answered "wait" for ever (the arm stays empty at the same share)
    p = CanaryParams(steps=(0.1, 0.5, 1.0))
    d = decide_canary(p, 0.1, outcomes("a", 14, 0.01, 2), outcomes("b", 1, 0.01, 2))
    assert (d.action, d.share) == ("advance", 0.5)
    assert "too few workloads to compare" in d.reason and "without a comparison" in d.reason
    # at the last step below 100 %: promoted only when an earlier step's comparison passed
    never = decide_canary(p, 0.5, outcomes("a", 14, 0.01, 2), outcomes("b", 2, 0.01, 2))
    assert never.action == "rollback" and "never compared" in never.reason and "shadow" in never.reason
    passed = decide_canary(p, 0.5, outcomes("a", 14, 0.01, 2), outcomes("b", 2, 0.01, 2), compared=True)
    assert passed.action == "promote" and "passed an earlier step" in passed.reason


def test_ab_reports_a_significant_difference_only_when_the_interval_excludes_zero():
    champ, chal = outcomes("a", 30, 0.02, 2.0, seed=1), outcomes("b", 30, 0.01, 2.0, seed=2)
    rep = {d.metric: d for d in ab_report(champ, chal)}
    v = rep["violation_fraction"]
    assert v.difference < 0 and v.high < 0 and v.significant
    assert v.low < v.difference < v.high
    assert not rep["forecast_error"].significant  # identical in both arms


def test_one_workload_in_an_arm_gives_no_interval_rather_than_a_certain_looking_one():
    one, many = outcomes("a", 1, 0.02, 2.0), outcomes("b", 5, 0.01, 2.0, seed=2)
    assert ab_report(one, many) == [] and ab_report(many, one) == []
    assert {d.metric for d in ab_report(outcomes("a", 2, 0.02, 2.0), many)} >= {"violation_fraction", "cost_per_demand"}
    single = [Outcome("w", 0.02, 2.0, 1.0)]
    assert shadow_report(single, [Outcome("w", 0.01, 2.0, 1.0)]) == []


def test_an_ab_evaluation_with_nothing_to_compare_says_so(tmp_path):
    book = RolloutBook(Store(f"sqlite:///{tmp_path / 'r.db'}"))
    book.start("g", "ab", "1", "2", T0)
    entry = book.evaluate(book.get("g"), {"champion": outcomes("a", 3, 0.01, 2.0), "challenger": []}, T0 + 1)
    assert entry["differences"] == []
    assert entry["note"].startswith("nothing to compare: 3 champion and 0 challenger outcome(s)")


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("w1,champion,-0.5,2.0", "violation_fraction -0.5 is not a share between 0 and 1"),
        ("w1,champion,nan,2.0", "violation_fraction nan is not a share between 0 and 1"),
        ("w1,champion,0.01,-2", "cost_per_demand -2 is not a finite number >= 0"),
        ("w1,champion,0.01,2.0,-1", "forecast_error -1 is not a finite number >= 0"),
    ],
)
def test_outcomes_no_measurement_can_give_are_refused(tmp_path, row, says):
    db = tmp_path / "r.db"
    assert _cli("start", "--challenger", "web-v2", "--mode", "ab", "--group", "web", db=db).returncode == 0
    csv = tmp_path / "o.csv"
    csv.write_text(f"workload,arm,violation_fraction,cost_per_demand,forecast_error\nw0,challenger,0.01,2.0,1\n{row}\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", db=db)
    assert out.returncode == 2 and f"o.csv:3: {says}" in str(out.exception)
    assert "history" not in RolloutBook(Store(f"sqlite:///{db}")).get("web").results  # nothing recorded


def test_shadow_pairs_the_same_workloads():
    champ = outcomes("w", 12, 0.02, 2.0, seed=3)
    chal = [Outcome(o.workload, o.violation_fraction - 0.005, o.cost_per_demand, o.forecast_error) for o in champ]
    rep = {d.metric: d for d in shadow_report(champ, chal)}
    assert rep["violation_fraction"].difference == pytest.approx(-0.005)
    assert rep["violation_fraction"].significant
    assert rep["cost_per_demand"].difference == pytest.approx(0.0)


def test_a_simulated_run_can_be_split_by_the_rollout_share():
    per_wl = {o.workload: o for o in outcomes("Deployment/default/w", 50, 0.01, 2.0)}
    champ, chal = split_outcomes(per_wl, 0.3, "salt")
    assert len(champ) + len(chal) == 50 and chal
    assert {o.workload for o in chal} == {k for k in per_wl if assign(k, 0.3, "salt") == "challenger"}


def test_rollout_state_survives_a_restart_and_a_canary_runs_to_promotion(db_url):
    store = Store(db_url)
    book = RolloutBook(store)
    rid = book.start("web", "canary", "3", "7", T0, CanaryParams(steps=(0.2, 1.0)))
    store.close()
    book = RolloutBook(Store(db_url))  # a restart
    r = book.get("web")
    assert (r.id, r.state, r.share, r.mode) == (rid, "running", 0.2, "canary")
    with pytest.raises(UserError, match="still running"):
        book.start("web", "ab", "3", "8", T0)
    good = {"champion": outcomes("a", 8, 0.01, 2.0), "challenger": outcomes("b", 4, 0.01, 2.0)}
    assert book.evaluate(book.get("web"), good, T0 + 3600)["decision"] == "promote"  # 20 % is the last step below 1
    r = book.get("web")
    assert r.state == "promoted" and len(r.results["history"]) == 1
    assert book.arm(r, "anything") == "challenger"


def test_an_aborted_rollout_sends_every_workload_back_to_the_champion(tmp_path):
    book = RolloutBook(Store(f"sqlite:///{tmp_path / 'r.db'}"))
    book.start("g", "ab", "1", "2", T0, split=0.5)
    r = book.abort("g", T0 + 1)
    assert r.state == "aborted"
    assert book.arm(r, "Deployment/default/x") == "champion"
    with pytest.raises(UserError, match="No running rollout"):
        book.promote("g", T0 + 2)


def _cli(*args, db):
    """The rollout commands of the Typer app, in this process."""
    from typer.testing import CliRunner

    from scaleahead.cli import app

    out = CliRunner().invoke(app, ["rollout", *args, "--db", f"sqlite:///{db}"])
    out.returncode = 2 if isinstance(out.exception, UserError) else out.exit_code
    return out


def test_the_rollout_cli_starts_evaluates_shows_and_aborts(tmp_path):
    db = tmp_path / "r.db"
    out = _cli("start", "--challenger", "web-v2", "--mode", "ab", "--group", "web", "--output", "json", db=db)
    assert out.returncode == 0, out.output
    assert json.loads(out.stdout)["share"] == 0.5
    csv = tmp_path / "o.csv"
    lines = ["workload,arm,violation_fraction,cost_per_demand,forecast_error"]
    lines += [f"w{i},champion,0.0{2 + i % 3},2.0,1.0" for i in range(10)]
    lines += [f"v{i},challenger,0.00{1 + i % 3},2.0,0.9" for i in range(10)]
    csv.write_text("\n".join(lines) + "\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", "--output", "json", db=db)
    assert out.returncode == 0, out.output
    diffs = {d["metric"]: d for d in json.loads(out.stdout)["differences"]}
    assert diffs["violation_fraction"]["significant"] and diffs["violation_fraction"]["difference"] < 0
    out = _cli("status", "--group", "web", db=db)
    assert "rollout 1 [running]" in out.stdout and "violation_fraction" in out.stdout
    assert _cli("abort", "--group", "web", db=db).returncode == 0
    bad = _cli("start", "--challenger", "7", "--mode", "blue-green", db=db)
    assert bad.returncode == 2 and "canary, ab or shadow" in str(bad.exception)


def test_a_model_version_the_registry_does_not_have_is_refused_and_nothing_is_recorded(tmp_path):
    db = tmp_path / "r.db"
    store = Store(f"sqlite:///{db}")
    known = store.register_model("wm-a", "window_mean")  # a learned one needs a checkpoint
    out = _cli("start", "--challenger", str(known + 998), "--mode", "canary", db=db)
    assert out.returncode == 2
    assert f"there is no model version {known + 998} in the registry" in str(out.exception)
    out = _cli("start", "--challenger", str(known), "--champion", "12345", "--mode", "canary", db=db)
    assert out.returncode == 2 and "--champion 12345" in str(out.exception)
    assert store.rollouts() == []
    assert _cli("start", "--challenger", str(known), "--mode", "canary", db=db).returncode == 0


def test_promoting_a_model_rollout_makes_the_challenger_the_registry_champion(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    old = store.register_model("lstm-a", "lstm", status="champion")
    new = store.register_model("lstm-b", "lstm")
    book = RolloutBook(store)
    book.start("g", "shadow", str(old), str(new), T0)
    book.promote("g", T0 + 1)
    assert {m.id: m.status for m in store.models()} == {old: "retired", new: "champion"}


def _bench_rollout(tmp_path, traces: list[str], champion: str, challenger: str) -> dict:
    from typer.testing import CliRunner

    from scaleahead.cli import app

    out_path = tmp_path / f"{champion}-{challenger}-{len(traces)}.json"
    args = ["bench", "rollout", "--json", str(out_path), "--traces", ",".join(traces), "--steps", "0.5,1.0"]
    out = CliRunner().invoke(app, [*args, "--champion", champion, "--challenger", challenger])
    assert out.exit_code == 0, out.output
    doc = json.loads(out_path.read_text())
    assert set(doc["per_workload"]) == set(traces)
    return doc


def _check_differences(differences: list[dict], champion: list[dict], challenger: list[dict]) -> None:
    """Each difference is the challenger's mean minus the champion's, recomputed from the per-workload
    outcomes of the arms (forecast_error is not measured by the bench: NaN, so not compared)."""
    assert [d["metric"] for d in differences] == ["violation_fraction", "cost_per_demand"]
    for d in differences:
        m = d["metric"]
        assert (d["n_champion"], d["n_challenger"]) == (len(champion), len(challenger))
        assert d["champion"] == pytest.approx(np.mean([o[m] for o in champion]))
        assert d["challenger"] == pytest.approx(np.mean([o[m] for o in challenger]))
        assert d["difference"] == pytest.approx(d["challenger"] - d["champion"])
        assert d["low"] < d["difference"] < d["high"]
        assert d["significant"] == (d["low"] > 0 or d["high"] < 0)


# Under the bench's salt, the first two are in the champion's arm at a 50 % share, the others in the
# challenger's (``assign``; checked below).
ROLLOUT_TRACES = [
    "nab-ec2_cpu_utilization_24ae8d",
    "nab-ec2_cpu_utilization_53ea38",
    "nab-rds_cpu_utilization_cc0c53",
]


@pytest.mark.parametrize(
    ("fourth", "champion", "challenger", "decisions"),
    [
        # window_mean lags the bursts of fe7f93: more SLO violations in its arm at 50 %.
        ("nab-ec2_cpu_utilization_fe7f93", "seasonal_naive", "window_mean", ["rollback"]),
        # On 825cc2 window_mean holds up at 50 %; at 100 % (no workload left on the champion) its
        # window is compared with the champion's means of the 50 % window: worse than seasonal_naive's,
        ("nab-ec2_cpu_utilization_825cc2", "seasonal_naive", "window_mean", ["advance", "rollback"]),
        # no worse than naive's.
        ("nab-ec2_cpu_utilization_825cc2", "naive", "window_mean", ["advance", "promote"]),
    ],
)
def test_bench_rollout_runs_canary_ab_and_shadow_on_the_simulated_cluster(
    tmp_path, fourth: str, champion: str, challenger: str, decisions: list[str]
):
    traces = [*ROLLOUT_TRACES, fourth]
    assert [assign(t, 0.5, "bench") for t in traces] == ["champion", "champion", "challenger", "challenger"]
    doc = _bench_rollout(tmp_path, traces, champion, challenger)
    per = doc["per_workload"]

    # Two workloads per arm at 50 %: too few for a t interval (3 each), and no later step below
    # 100 %: the canary is never compared, so it is rolled back, whichever forecaster is better.
    canary = doc["canary"]
    assert [h["decision"] for h in canary["history"]] == ["rollback"]
    assert canary["state"] == "rolled-back" and canary["final_share"] == 0.5
    first = canary["history"][0]
    assert (first["window"], first["share"]) == (1, 0.5)  # window 0 is every workload's baseline
    assert (first["champion_workloads"], first["challenger_workloads"]) == (2, 2)
    assert "never compared" in first["reason"]
    del decisions

    # A/B: the fixed split puts two workloads in each arm, every workload in exactly one.
    ab = doc["ab"]
    assert (ab["champion_workloads"], ab["challenger_workloads"]) == (2, 2)
    assert ab["champion_workloads"] + ab["challenger_workloads"] == len(traces)
    _check_differences(
        ab["differences"],
        [per[t]["champion"] for t in traces[:2]],
        [per[t]["challenger"] for t in traces[2:]],
    )

    # Shadow: every workload paired with itself.
    assert doc["shadow"]["workloads"] == len(traces)
    _check_differences(
        doc["shadow"]["differences"],
        [per[t]["champion"] for t in traces],
        [per[t]["challenger"] for t in traces],
    )


def test_a_canary_step_needs_a_whole_window_of_outcomes_before_it_decides(db_url):
    book = RolloutBook(Store(db_url))
    book.start("web", "canary", "3", "7", T0, CanaryParams(steps=(0.1, 0.5, 1.0), window_s=3600.0))
    good = {"champion": outcomes("a", 8, 0.01, 2.0), "challenger": outcomes("b", 4, 0.01, 2.0)}
    quick = [book.evaluate(book.get("web"), good, T0 + s)["decision"] for s in (1, 2, 3, 4)]
    assert quick == ["wait"] * 4 and book.get("web").share == 0.1
    assert "for 4 s of the 3600 s window" in book.get("web").results["last"]["reason"]
    assert book.evaluate(book.get("web"), good, T0 + 3600)["decision"] == "advance"
    assert book.evaluate(book.get("web"), good, T0 + 3700)["decision"] == "wait"  # the new share's window
    assert book.get("web").share == 0.5
    assert book.evaluate(book.get("web"), good, T0 + 7200)["decision"] == "promote"


def test_a_canary_evaluated_on_a_clock_behind_the_start_says_so_instead_of_a_negative_time(db_url):
    book = RolloutBook(Store(db_url))
    book.start("web", "canary", "3", "7", T0, CanaryParams(steps=(0.1, 1.0), window_s=3600.0))
    good = {"champion": outcomes("a", 8, 0.01, 2.0), "challenger": outcomes("b", 2, 0.01, 2.0)}
    assert book.evaluate(book.get("web"), good, T0 - 3595)["decision"] == "wait"
    reason = book.get("web").results["last"]["reason"]
    assert "-3595" not in reason and "this clock is 3595 s before the time" in reason, reason
    assert "check this machine's clock" in reason and book.get("web").share == 0.1


def test_a_promotion_that_fails_in_the_registry_leaves_the_rollout_running_to_retry(db_url):
    from sqlalchemy.exc import OperationalError

    from tests.conftest import fail_once

    store = Store(db_url)
    old = store.register_model("old", "ridge", status="champion")
    new = store.register_model("new", "ridge", status="challenger")
    book = RolloutBook(store)
    book.start("default", "shadow", str(old), str(new), T0)
    fail_once(store.engine, "UPDATE model_versions", "database is locked")

    with pytest.raises(OperationalError):
        book.promote("default", T0 + 10)
    assert book.get("default").state == "running"  # nothing half-recorded
    assert {m.id: m.status for m in store.models()} == {old: "champion", new: "challenger"}
    assert book.promote("default", T0 + 20).state == "promoted"
    assert {m.id: m.status for m in store.models()} == {old: "retired", new: "champion"}


def test_promoting_a_rollout_whose_champion_is_named_retires_the_familys_champion(db_url):
    # retraining starts its rollouts with the champion's name, not a version id
    store = Store(db_url)
    old = store.register_model("ridge-a", "ridge", status="champion")
    new = store.register_model("ridge-b", "ridge", status="challenger")
    book = RolloutBook(store)
    book.start("default", "shadow", "ridge", str(new), T0)
    assert book.promote("default", T0 + 10).state == "promoted"
    assert {m.id: m.status for m in store.models()} == {old: "retired", new: "champion"}


def test_a_canary_without_forecast_errors_reaches_promotion_through_storage(db_url):
    # forecast_error is optional: its means are NaN, stored as JSON null, and read back from storage
    nan = float("nan")
    book = RolloutBook(Store(db_url))
    book.start("web", "canary", "3", "7", T0, CanaryParams(steps=(0.25, 0.5, 1.0)))
    champ = [Outcome(f"a{i}", 0.01, 2.0 + i / 100, nan) for i in range(4)]
    chal = [Outcome(f"b{i}", 0.01, 2.0 + i / 100, nan) for i in range(4)]
    assert book.evaluate(book.get("web"), {"champion": champ, "challenger": chal}, T0 + 3600)["decision"] == "advance"
    book = RolloutBook(Store(db_url))  # a restart: the history comes from the database
    assert book.get("web").results["history"][0]["champion_forecast_error"] is None
    entry = book.evaluate(book.get("web"), {"champion": champ, "challenger": chal}, T0 + 7200)
    assert entry["decision"] == "promote" and "shown no worse" in entry["reason"]
    assert book.get("web").state == "promoted"


def test_a_stale_evaluation_never_undoes_an_abort_nor_promotes_an_aborted_rollout(db_url):
    # `rollout evaluate` reads the running rollout, then records its decision: an abort committed
    # in between must stand, and the decision is refused with nothing recorded
    store = Store(db_url)
    old = store.register_model("old", "ridge", status="champion")
    new = store.register_model("new", "ridge", status="challenger")
    book = RolloutBook(store)
    book.start("web", "canary", str(old), str(new), T0, CanaryParams(steps=(0.5, 1.0)))
    good = {"champion": outcomes("a", 3, 0.01, 2.0), "challenger": outcomes("b", 3, 0.01, 2.0)}
    seen = book.running("web")
    RolloutBook(Store(db_url)).abort("web", T0 + 3650)  # the operator, in another process
    with pytest.raises(UserError, match=r"changed meanwhile \(now aborted\); nothing was recorded"):
        book.evaluate(seen, good, T0 + 3700)
    r = book.get("web")
    assert (r.state, r.share, r.results) == ("aborted", 0.0, {})
    assert book.running("web") is None

    # at the last step a stale evaluation would promote: refused, the registry untouched
    book.start("web", "canary", str(old), str(new), T0 + 4000, CanaryParams(steps=(1.0,)))
    seen = book.running("web")
    book.abort("web", T0 + 7300)
    with pytest.raises(UserError, match="changed meanwhile"):
        book.evaluate(seen, {"champion": [], "challenger": good["challenger"]}, T0 + 8000)
    assert book.get("web").state == "aborted"
    assert {m.id: m.status for m in store.models()} == {old: "champion", new: "challenger"}


def test_two_overlapping_evaluations_never_lose_a_history_entry(db_url):
    book = RolloutBook(Store(db_url))
    book.start("web", "ab", "3", "7", T0, split=0.5)
    good = {"champion": outcomes("a", 3, 0.01, 2.0), "challenger": outcomes("b", 3, 0.01, 2.0)}
    first, second = book.running("web"), book.running("web")
    book.evaluate(first, good, T0 + 10)
    with pytest.raises(UserError, match=r"changed meanwhile \(now running\)"):
        book.evaluate(second, good, T0 + 11)  # its history would lack the first's entry
    assert [h["at"] for h in book.get("web").results["history"]] == [T0 + 10]
    book.evaluate(book.running("web"), good, T0 + 12)  # run again: both entries kept
    assert [h["at"] for h in book.get("web").results["history"]] == [T0 + 10, T0 + 12]


def test_two_rollouts_started_at_once_in_one_group_the_second_is_refused(db_url, monkeypatch):
    # both check "is one running?" before either inserts (the daemon's retraining and the CronJob's)
    first, second = RolloutBook(Store(db_url)), RolloutBook(Store(db_url))
    monkeypatch.setattr(second, "running", lambda group: None, raising=False)
    first.start("web", "shadow", "3", "7", T0)
    with pytest.raises(UserError, match="still running in group 'web'"):
        second.start("web", "shadow", "3", "8", T0)
    assert [(r.challenger, r.state) for r in first.store.rollouts()] == [("7", "running")]
    assert second.start("other", "shadow", "3", "8", T0) > 0  # another group is free


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (30, 2.042), (1e9, 1.960)]
)
def test_the_t_quantile_matches_the_tables(df, expected):
    from actuator.rollouts import t_quantile

    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=5e-4)


def test_the_t_quantile_of_a_fractional_df_lies_between_its_whole_neighbours():
    from actuator.rollouts import t_quantile

    assert t_quantile(0.975, 3) < t_quantile(0.975, 2.5) < t_quantile(0.975, 2)
    assert t_quantile(0.995, 3) == pytest.approx(5.841, abs=5e-4)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_equal_means_are_called_significant_about_5_percent_of_the_time_with_few_workloads(n):
    # a normal (z) interval with 2-5 workloads per arm is far too narrow: it called 8-20 % of
    # equal-mean comparisons significant; Student t (Welch df; paired: n - 1) keeps it near 5 %
    rng = np.random.default_rng(n)
    trials = 2000
    ab = shadow = 0
    for _ in range(trials):
        a, b = rng.normal(0.01, 0.002, n), rng.normal(0.01, 0.002, n)
        champ = [Outcome(f"w{i}", float(a[i]), 2.0) for i in range(n)]
        chal = [Outcome(f"w{i}", float(b[i]), 2.0) for i in range(n)]
        ab += {d.metric: d for d in ab_report(champ, chal)}["violation_fraction"].significant
        shadow += {d.metric: d for d in shadow_report(champ, chal)}["violation_fraction"].significant
    # Welch's interval is a little conservative at two per arm (about 2 %)
    assert 0.01 <= ab / trials <= 0.07
    assert 0.03 <= shadow / trials <= 0.07


TWICE = "w1,challenger,0.01,2.0"


@pytest.mark.parametrize(
    ("mode", "rows", "says"),
    [
        # one workload twice in one arm would pass "two per arm" with a zero-width interval
        ("ab", [TWICE, "w2,champion,0.02,2.0", TWICE], "w1 in the challenger arm on lines 2, 4"),
        ("shadow", ["w1,champion,0.01,2.0", "w1,champion,0.01,2.0", TWICE], "w1 in the champion arm on lines 2, 3"),
        # outside shadow mode a workload runs in one arm
        (
            "ab",
            [TWICE, "w2,champion,0.02,2.0", "w1,champion,0.01,2.0"],
            "listed in both arms, but in an A/B rollout it runs in one: w1 (lines 4 and 2)",
        ),
    ],
)
def test_a_workload_listed_twice_is_refused_with_its_lines_and_nothing_is_recorded(tmp_path, mode, rows, says):
    db = tmp_path / "r.db"
    assert _cli("start", "--challenger", "web-v2", "--mode", mode, "--group", "web", db=db).returncode == 0
    csv = tmp_path / "o.csv"
    csv.write_text("workload,arm,violation_fraction,cost_per_demand\n" + "\n".join(rows) + "\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", db=db)
    assert out.returncode == 2 and says in str(out.exception), str(out.exception)
    assert "nothing was recorded" in str(out.exception)
    assert "history" not in RolloutBook(Store(f"sqlite:///{db}")).get("web").results


def test_a_workload_listed_twice_by_the_assignment_is_refused_and_shadow_takes_both_arms(tmp_path):
    db = tmp_path / "r.db"
    assert _cli("start", "--challenger", "web-v2", "--mode", "ab", "--group", "web", db=db).returncode == 0
    csv = tmp_path / "o.csv"
    csv.write_text("workload,arm,violation_fraction,cost_per_demand\nw1,,0.01,2.0\nw2,,0.01,2.0\nw1,,0.02,2.0\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", db=db)
    assert out.returncode == 2 and "w1 in the" in str(out.exception) and "lines 2, 4" in str(out.exception)
    assert _cli("abort", "--group", "web", db=db).returncode == 0
    assert _cli("start", "--challenger", "web-v3", "--mode", "shadow", "--group", "web", db=db).returncode == 0
    lines = [f"w{i},{arm},0.0{1 + i % 3},2.0" for i in range(3) for arm in ("champion", "challenger")]
    csv.write_text("workload,arm,violation_fraction,cost_per_demand\n" + "\n".join(lines) + "\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", "--output", "json", db=db)
    assert out.returncode == 0, out.output
    assert {d["n_champion"] for d in json.loads(out.stdout)["differences"]} == {3}


def test_an_arm_column_that_contradicts_the_assignment_is_warned_about_and_used(tmp_path):
    from actuator.rollouts import assign

    db = tmp_path / "r.db"
    assert _cli("start", "--challenger", "web-v2", "--mode", "ab", "--group", "web", db=db).returncode == 0
    names = [f"Deployment/shop/w{i}" for i in range(40)]
    chal = [n for n in names if assign(n, 0.5, "web:web-v2") == "challenger"][:2]
    champ = [n for n in names if assign(n, 0.5, "web:web-v2") == "champion"][:3]
    rows = [f"{n},,0.01,2.0" for n in chal] + [f"{n},,0.02,2.0" for n in champ[:2]]
    rows.append(f"{champ[2]},challenger,0.01,2.0")
    csv = tmp_path / "o.csv"
    csv.write_text("workload,arm,violation_fraction,cost_per_demand\n" + "\n".join(rows) + "\n")
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", "--output", "json", db=db)
    assert out.returncode == 0, out.output
    assert f"1 row(s) name another arm than the rollout assigns the workload to: {champ[2]} (line 6: challenger)" in (
        out.stderr
    )
    assert {d["n_challenger"] for d in json.loads(out.stdout)["differences"]} == {3}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (bytes(range(128, 256)) * 3, "is not a text CSV file: it is not UTF-8"),
        (b"workload,arm,violation_fraction,cost_per_demand\n", "has its header but no rows"),
        (b"workload,arm,violation_fraction,cost_per_demand\nw1,champion\n", ":2: the row has fewer cells"),
        (b"", "the file is empty"),
        (b"name,value\nw1,3\n", "its first line has name, value"),
    ],
)
def test_an_outcomes_file_that_is_binary_empty_or_short_is_refused_with_what_is_wrong(tmp_path, content, says):
    # A binary file was a UnicodeDecodeError traceback, a header-only one "needs a header with ...".
    db = tmp_path / "r.db"
    assert _cli("start", "--challenger", "web-v2", "--mode", "canary", "--group", "web", db=db).returncode == 0
    csv = tmp_path / "o.csv"
    csv.write_bytes(content)
    out = _cli("evaluate", "--outcomes", str(csv), "--group", "web", db=db)
    assert out.returncode == 2 and isinstance(out.exception, UserError), out.exception
    assert says in str(out.exception), str(out.exception)
    assert "history" not in RolloutBook(Store(f"sqlite:///{db}")).get("web").results


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--challenger", "9999"], "--challenger 9999: there is no model version 9999 in the registry: No scaleahead"),
        (["--challenger", "web-v2", "--champion", "7"], "--champion 7: there is no model version 7"),
        (["--challenger", "-3"], "--challenger -3 is not a model version id"),
        (["--challenger", "web-v2", "--group", ""], "--group is empty"),
        (["--challenger", "web-v2", "--group", "  "], "--group is empty"),
    ],
)
def test_rollout_start_refuses_a_bad_version_or_group_without_creating_a_database(tmp_path, args, says):
    # The database was created (and migrated) just to say the version does not exist; -3 was
    # taken as a policy label, "" as a group no policy can be in.
    db = tmp_path / "f5.db"
    out = _cli("start", "--mode", "canary", *args, db=db)
    assert out.returncode == 2 and says in str(out.exception), str(out.exception)
    assert not db.exists()
