"""``scaleahead bench rollout``: a rollout end to end on the simulated cluster.

Each trace is one workload. Both the champion and the challenger forecaster drive the planner
over the test period on the simulated service (EVALUATION.md section 4, ``bench.replay``). The
rollout logic of ``actuator.rollouts`` then runs on those outcomes:

- canary: the test period is cut into a baseline window (every workload on the champion: each
  workload's baseline) and one window per look the canary may take (``CanaryParams.looks``); in
  window k, the workloads whose stable hash puts them in the challenger's arm at the current share
  are scored on the challenger's run, the others on the champion's; ``decide_canary`` advances,
  waits (inconclusive), promotes or rolls back;
- ``aa``: an A/A check (the challenger is the champion) over many assignments;
- A/B: a fixed split over the whole test period, differences with 95 % confidence intervals;
- shadow: every workload on both runs, paired differences.

Simplification: a workload that moves to the challenger at a step is scored on the challenger's
continuous run (the transient of switching forecasters mid-run is not simulated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from actuator.rollouts import CanaryParams, Outcome, ab_report, assign, decide_canary, shadow_report
from scaleahead.bench.replay import compute_metrics, fit_model, prepare, replay_policy_object, run_predictive
from scaleahead.errors import UserError
from scaleahead.traces import load_series

DEFAULT_TRACES = tuple(
    f"nab-{n}"
    for n in (
        "ec2_cpu_utilization_24ae8d",
        "ec2_cpu_utilization_53ea38",
        "ec2_cpu_utilization_5f5533",
        "ec2_cpu_utilization_77c1ca",
        "ec2_cpu_utilization_825cc2",
        "ec2_cpu_utilization_ac20cd",
        "ec2_cpu_utilization_c6585a",
        "ec2_cpu_utilization_fe7f93",
        "rds_cpu_utilization_cc0c53",
        "rds_cpu_utilization_e47b3b",
        "elb_request_count_8c0756",
        "ec2_network_in_257a54",
        "ec2_network_in_5abac7",
        "ec2_disk_write_bytes_1ef3de",
        "ec2_disk_write_bytes_c0d644",
    )
)


def _outcome(workload: str, setup: Any, run: Any, i0: int, i1: int) -> Outcome:
    m = compute_metrics(
        setup.demand[i0:i1], run.desired[i0:i1], run.allocated[i0:i1], run.ready[i0:i1], setup.capacity, setup.step_s
    )
    util = m["utilization"]
    return Outcome(workload, m["violation_fraction"], 1.0 / util if util > 0 else math.inf)


def run_rollout_bench(
    traces: Sequence[str],
    champion: str,
    challenger: str,
    params: CanaryParams,
    split: float = 0.5,
    salt: str = "bench",
    aa: bool = False,
) -> dict[str, Any]:
    """Replay every trace with both forecasters, then run canary, A/B and shadow on the outcomes.

    ``aa``: an A/A check; the challenger may be the champion, and the result has ``aa``: how often
    the canary rolls back or promotes, and A/B says "significant", over ``AA_ASSIGNMENTS`` salts."""
    if champion == challenger and not aa:
        raise UserError(
            f"Champion and challenger are both {champion!r}.",
            "Pick two different forecasters, or give --aa for an A/A check of the decision rule.",
        )
    runs: dict[str, tuple[Any, Any, Any]] = {}
    skipped: dict[str, str] = {}
    for name in traces:
        try:
            setup = prepare(load_series(name), name=name)
        except UserError as exc:
            skipped[name] = exc.message
            continue
        pol = replay_policy_object(setup, name="rollout")
        arms: list[Any] = []
        for model_name in (champion, challenger):
            if arms and model_name == champion:
                arms.append(arms[0])  # A/A: the same run in both arms
                continue
            model, _ = fit_model(model_name, setup)
            arms.append(run_predictive(setup, model, pol, model_name))
        runs[name] = (setup, arms[0], arms[1])
    if len(runs) < 2:
        raise UserError(
            f"Only {len(runs)} usable trace(s) of {len(traces)}: a rollout needs workloads in both arms.",
            "Give more --traces.",
        )

    per_workload = {
        name: {
            "champion": asdict(_outcome(name, s, a, 0, s.demand.size)),
            "challenger": asdict(_outcome(name, s, b, 0, s.demand.size)),
        }
        for name, (s, a, b) in runs.items()
    }

    state, share, history = _canary(runs, params, salt)
    whole = {name: (s, a, b) for name, (s, a, b) in runs.items()}
    ab_champ = [
        _outcome(n, s, a, 0, s.demand.size) for n, (s, a, _) in whole.items() if assign(n, split, salt) != "challenger"
    ]
    ab_chal = [
        _outcome(n, s, b, 0, s.demand.size) for n, (s, _, b) in whole.items() if assign(n, split, salt) == "challenger"
    ]
    sh_champ = [_outcome(n, s, a, 0, s.demand.size) for n, (s, a, _) in whole.items()]
    sh_chal = [_outcome(n, s, b, 0, s.demand.size) for n, (s, _, b) in whole.items()]
    doc: dict[str, Any] = {
        "trace": ",".join(runs),
        "champion": champion,
        "challenger": challenger,
        "params": asdict(params) | {"split": split, "salt": salt},
        "skipped": skipped,
        "per_workload": per_workload,
        "canary": {"state": state, "final_share": share, "history": history},
        "ab": {
            "champion_workloads": len(ab_champ),
            "challenger_workloads": len(ab_chal),
            "differences": [asdict(x) | {"significant": x.significant} for x in ab_report(ab_champ, ab_chal)],
        },
        "shadow": {
            "workloads": len(sh_chal),
            "differences": [asdict(x) | {"significant": x.significant} for x in shadow_report(sh_champ, sh_chal)],
        },
    }
    if aa:
        doc["aa"] = _aa_rates(runs, params, split)
    return doc


#: How many assignments (salts) ``bench rollout --aa`` decides over.
AA_ASSIGNMENTS = 200


def _windows(params: CanaryParams) -> int:
    """The canary's windows: a baseline window, then every look it may take."""
    return 1 + params.looks()


def _canary(
    runs: Mapping[str, tuple[Any, Any, Any]], params: CanaryParams, salt: str
) -> tuple[str, float, list[dict[str, Any]]]:
    """A canary over the test period cut into windows: window 0 (every workload on the champion) is
    each workload's baseline; each later window is one ``evaluate`` at the share in force."""
    n = _windows(params)
    cut = {name: np.linspace(0, s.demand.size, n + 1).astype(int) for name, (s, _, _) in runs.items()}
    base = {name: _outcome(name, s, a, int(cut[name][0]), int(cut[name][1])) for name, (s, a, _) in runs.items()}
    history: list[dict[str, Any]] = []
    share, state, inconclusive, compared = params.steps[0], "running", 0, False
    for k in range(1, n):
        champ: list[Outcome] = []
        chal: list[Outcome] = []
        for name, (s, a, b) in runs.items():
            i0, i1 = int(cut[name][k]), int(cut[name][k + 1])
            arm = assign(name, share, salt)
            o = _outcome(name, s, b if arm == "challenger" else a, i0, i1)
            o = replace(
                o, baseline_violation_fraction=base[name].violation_fraction,
                baseline_cost_per_demand=base[name].cost_per_demand,
            )  # fmt: skip
            (chal if arm == "challenger" else champ).append(o)
        d = decide_canary(params, share, champ, chal, None, inconclusive, compared)
        history.append(
            {
                "window": k,
                "share": share,
                "champion_workloads": len(champ),
                "challenger_workloads": len(chal),
                "decision": d.action,
                "reason": d.reason,
            }
        )
        if d.action == "rollback":
            return "rolled-back", share, history
        if d.action == "promote":
            return "promoted", share, history
        if d.action == "advance":
            compared = compared or "level" in d.summary
            inconclusive, share = 0, d.share
        elif share < 1.0:
            inconclusive += 1
        else:
            break  # at 100 % it waits for a person
    return state, share, history


def _aa_rates(runs: Mapping[str, tuple[Any, Any, Any]], params: CanaryParams, split: float) -> dict[str, Any]:
    """Over ``AA_ASSIGNMENTS`` salts: the canary's final states and A/B's "significant" share."""
    n = AA_ASSIGNMENTS
    states = {"rolled-back": 0, "promoted": 0, "running": 0}
    worse = significant = 0
    for i in range(n):
        state, _, history = _canary(runs, params, f"aa-{i}")
        states[state] += 1
        worse += state == "rolled-back" and "lower bound" in history[-1]["reason"]
        champ = [
            _outcome(k, s, a, 0, s.demand.size)
            for k, (s, a, _) in runs.items()
            if assign(k, split, f"aa-{i}") != "challenger"
        ]
        chal = [
            _outcome(k, s, b, 0, s.demand.size)
            for k, (s, _, b) in runs.items()
            if assign(k, split, f"aa-{i}") == "challenger"
        ]
        significant += any(x.significant for x in ab_report(champ, chal))
    return {
        "assignments": n,
        "canary_rolled_back": states["rolled-back"] / n,
        "canary_shown_worse": worse / n,
        "canary_not_shown_no_worse": (states["rolled-back"] - worse) / n,
        "canary_promoted": states["promoted"] / n,
        "canary_undecided": states["running"] / n,
        "ab_significant": significant / n,
    }
