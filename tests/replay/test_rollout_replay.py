"""A rollout closed-loop inside one replay: arms from the live state in storage, canary decisions mid-run.

Real NAB traces (5-minute steps), a few hundred steps, cheap baselines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actuator.rollouts import CanaryParams, RolloutBook
from scaleahead.bench.rollout_loop import GROUP, run_rollout_replay
from scaleahead.errors import UserError
from scaleahead.traces import load_series, split_of
from scaleahead.types import Series
from storage import Store

from .conftest import cli

NAMES = (
    "nab-ec2_cpu_utilization_24ae8d",
    "nab-ec2_cpu_utilization_53ea38",
    "nab-ec2_cpu_utilization_5f5533",
    "nab-ec2_cpu_utilization_77c1ca",
    "nab-ec2_cpu_utilization_825cc2",
    "nab-rds_cpu_utilization_cc0c53",
)
STEPS = 288  # one day of 5-minute steps
WINDOW_S = 6 * 3600.0  # 72 steps per evaluation
#: Margins no challenger can exceed (always advance) and margins every challenger exceeds (roll back).
LENIENT = {"max_violation_increase": 1.0, "max_cost_increase": 1e9, "max_error_increase": 1e9}
STRICT = {"max_violation_increase": -1.0}


@pytest.fixture(scope="module")
def traces() -> list[tuple[str, Series]]:
    return [(n, load_series(n)) for n in NAMES]


def run(
    traces, mode: str = "canary", db: str | None = None, compare: bool = False, capacity=None, **canary: Any
) -> dict[str, Any]:
    params = CanaryParams(steps=(0.25, 0.5, 1.0), window_s=WINDOW_S, **canary)
    return run_rollout_replay(
        traces,
        mode,
        "seasonal_naive",
        "window_mean",
        params,
        max_steps=STEPS,
        db_url=db,
        compare=compare,
        capacity=capacity,
    )


def test_a_canary_that_holds_up_advances_mid_run_switches_workloads_and_is_promoted_in_storage(traces, tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    doc = run(traces, db=db, **LENIENT)
    tl = doc["rollout"]["timeline"]
    # 25 %: one of six workloads on the challenger, too few to compare, so it advances; 50 %: one
    # inconclusive window, then shown no worse (the margins are lenient), promoted from the last
    # step below 100 % (the decision rule of 2026-12-06)
    assert [e["decision"] for e in tl[:3]] == ["advance", "wait", "promote"]
    assert [e["step"] for e in tl[:3]] == [72, 144, 216]
    assert [(e["share"], e["new_share"]) for e in tl[:3]] == [(0.25, 0.5), (0.5, 0.5), (0.5, 1.0)]
    assert "without a comparison" in tl[0]["why"] and "inconclusive" in tl[1]["why"]
    assert all(e["why"] for e in tl)
    # Workloads switched forecaster at the decision steps, and only there.
    switched = [k for e in tl for k in e["switched"]]
    assert switched, "some workload moved to the challenger during the run"
    per = doc["workloads"]
    assert per[switched[0]]["rollout"]["challenger_steps"] < STEPS
    after_promotion = STEPS - 216
    assert all(w["rollout"]["challenger_steps"] >= after_promotion for w in per.values())
    # The state went through storage and is still there.
    store = Store(db)
    try:
        (stored,) = store.rollouts(group=GROUP)
        assert stored.state == "promoted" and stored.share == 1.0
        assert [h["decision"] for h in stored.results["history"]] == ["advance", "wait", "promote"]
        assert RolloutBook(store).arm(stored, NAMES[0]) == "challenger"
    finally:
        store.close()
    assert doc["rollout"]["state"] == "promoted"


def test_a_canary_that_is_worse_is_rolled_back_and_every_workload_returns_to_the_champion(traces):
    doc = run(traces, compare=True, **STRICT)
    tl = doc["rollout"]["timeline"]
    rollback = next(e for e in tl if e["decision"] == "rollback")
    assert rollback["new_share"] == 0.0 and rollback["switched"]
    assert "violates the SLO more" in rollback["why"]
    assert doc["rollout"]["state"] == "rolled-back"
    # After the rollback no workload ran the challenger: challenger steps all lie before the decision.
    for key in rollback["switched"]:
        assert doc["workloads"][key]["rollout"]["challenger_steps"] <= rollback["step"]
    assert tl[-1] is rollback, "nothing is decided after a rollback"


def test_the_canary_is_a_real_mix_between_the_all_champion_and_all_challenger_runs(traces):
    doc = run(traces, compare=True, **LENIENT)
    pol = doc["policies"]
    assert set(pol) == {"rollout", "all_champion", "all_challenger"}
    assert pol["all_champion"]["challenger_steps"] == 0
    assert pol["all_challenger"]["challenger_steps"] == STEPS * len(NAMES)
    assert 0 < pol["rollout"]["challenger_steps"] < STEPS * len(NAMES)
    # Not a copy of either reference: the loop switched forecasters while running.
    assert pol["rollout"]["replica_seconds"] not in (
        pol["all_champion"]["replica_seconds"],
        pol["all_challenger"]["replica_seconds"],
    )


def test_shadow_acts_only_with_the_champion_and_the_challenger_plans_on_a_twin(traces):
    doc = run(traces, mode="shadow", compare=True)
    per = doc["workloads"]
    for w in per.values():
        # The champion acts everywhere: identical to the all-champion run of the same loop.
        assert w["rollout"] == w["all_champion"]
        # The challenger's twin saw the same demand and its own plans: identical to all-challenger.
        assert w["shadow_challenger"] == w["all_challenger"]
    tl = doc["rollout"]["timeline"]
    assert [e["decision"] for e in tl] == ["report"] * 4 + ["final report"]
    assert all(e["champion_workloads"] == e["challenger_workloads"] == len(NAMES) for e in tl)
    assert {d["metric"] for d in tl[-1]["differences"]} == {"violation_fraction", "cost_per_demand", "forecast_error"}


def test_ab_keeps_a_fixed_split_for_the_whole_run(traces):
    doc = run(traces, mode="ab")
    steps = [w["rollout"]["challenger_steps"] for w in doc["workloads"].values()]
    assert set(steps) <= {0, STEPS} and 0 < steps.count(STEPS) < len(NAMES)
    assert all(e["switched"] == [] and e["share"] == 0.5 for e in doc["rollout"]["timeline"])


def test_a_decision_never_depends_on_demand_after_it(traces):
    """Changing every trace after step 150 changes no decision taken at or before step 144.

    Capacity is fixed: by default it is the p99 of the whole test period (EVALUATION.md), a scale
    the protocol sets for everyone, not a decision.
    """
    base = run(traces, **LENIENT | {"max_violation_increase": 0.01})
    capacity = base["capacity_per_replica"]
    altered: list[tuple[str, Series]] = []
    for name, s in traces:
        v = s.values.copy()
        test_start = s.index_of(split_of(s, name).test_start)
        v[test_start + 150 :] = v[test_start + 150 :] * 3.0 + 50.0
        altered.append((name, Series(s.name, s.start, s.step_s, v, s.unit)))
    base = run(traces, capacity=capacity, **LENIENT | {"max_violation_increase": 0.01})
    other = run(altered, capacity=capacity, **LENIENT | {"max_violation_increase": 0.01})
    early = [e for e in base["rollout"]["timeline"] if e["step"] <= 144]
    assert early
    assert early == [e for e in other["rollout"]["timeline"] if e["step"] <= 144]
    key = NAMES[0]
    a, b = base["workloads"][key]["rollout"], other["workloads"][key]["rollout"]
    assert a != b, "the altered demand did change the later part of the run"


def test_traces_of_different_resolutions_are_refused(traces):
    s = traces[0][1]
    coarse = Series("coarse", s.start, s.step_s * 2, s.values[::2].copy(), s.unit)
    with pytest.raises(UserError, match="different resolutions"):
        run([traces[0], ("coarse", coarse)])


def test_one_trace_is_not_a_rollout(traces):
    with pytest.raises(UserError, match="at least two workloads"):
        run(traces[:1])


# -- the command ---------------------------------------------------------------------------------------
def _trace_args(names=NAMES[:4]) -> list[str]:
    return [a for n in names for a in ("--trace", n)]


def test_the_command_prints_the_timeline_and_writes_it_into_the_json(tmp_path: Path):
    out = tmp_path / "r.json"
    res = cli(
        "bench",
        "replay",
        *_trace_args(),
        "--rollout",
        "canary",
        "--challenger",
        "window_mean",
        "--canary-steps",
        "0.5,1.0",
        "--rollout-window",
        str(WINDOW_S),
        "--steps",
        "200",
        "--no-compare",
        "--json",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    tl = doc["rollout"]["timeline"]
    assert tl and {"step", "share", "decision", "why"} <= set(tl[0])
    assert "canary rollout: champion seasonal_naive vs challenger window_mean, 4 workloads" in res.stdout
    assert tl[0]["decision"] in res.stdout and "rollout 1 ended" in res.stdout
    assert doc["params"]["canary"]["steps"] == [0.5, 1.0]
    assert np.isfinite(doc["policies"]["rollout"]["violation_fraction"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rollout", "canary"], "--rollout needs --challenger"),
        (["--rollout", "blue-green", "--challenger", "naive"], "is not a rollout mode"),
        (["--rollout", "canary", "--challenger", "no_such_model"], "is not a registered model"),
        (["--rollout", "canary", "--challenger", "naive", "--canary-steps", "0.5,0.25"], "must rise"),
        (["--rollout", "canary", "--challenger", "naive", "--model", "naive"], "do not apply to a --rollout"),
        (["--challenger", "naive"], "--trace was given 4 times"),
    ],
)
def test_bad_rollout_options_are_clear_errors_and_write_nothing(tmp_path: Path, args: list[str], message: str):
    out = tmp_path / "r.json"
    res = cli("bench", "replay", *_trace_args(), *args, "--json", str(out))
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in " ".join((res.stdout + res.stderr).split())
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--split", "1.5"], "--split 1.5 is not a share strictly between 0 and 1"),
        (["--split", "nan"], "--split nan is not a share"),
        (["--steps", "1"], "--steps 1 is too few to run a rollout"),
    ],
)
def test_a_bad_split_or_steps_is_refused_before_any_trace_is_read(tmp_path: Path, args: list[str], message: str):
    """The traces here do not exist: before 2026-12-05 evening the traces were read (and the models
    fitted, minutes on real ones) before --split and --steps were looked at."""
    missing = [str(tmp_path / f"missing-{i}.csv") for i in range(2)]
    res = cli(
        "bench", "replay", "--trace", missing[0], "--trace", missing[1], "--rollout", "ab", "--challenger", "naive",
        "--json", str(tmp_path / "r.json"), *args,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    said = " ".join((res.stdout + res.stderr).split())
    assert message in said and "missing-0" not in said, said
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--challenger", "naive"], "--challenger only applies with --rollout"),
        (["--champion", "ridge", "--split", "0.5"], "--champion, --split only apply with --rollout"),
        (["--no-compare"], "--compare/--no-compare only applies with --rollout"),
    ],
)
def test_without_rollout_a_rollout_option_is_refused(tmp_path: Path, args: list[str], message: str):
    # --split 0.5 is the default value: given on the command line, it is refused all the same
    res = cli("bench", "replay", *_trace_args(NAMES[:1]), *args, "--json", str(tmp_path / "x.json"))
    assert res.returncode == 2
    assert message in " ".join(res.stderr.split())
