"""``scaleahead bench rollout``: a rollout end to end on the simulated cluster.

Each trace is one workload. Both the champion and the challenger forecaster drive the planner
over the test period on the simulated service (EVALUATION.md section 4, ``bench.replay``). The
rollout logic of ``actuator.rollouts`` then runs on those outcomes:

- canary: the test period is cut into one window per share step; in window k, the workloads whose
  stable hash puts them in the challenger's arm at the current share are scored on the
  challenger's run, the others on the champion's; ``decide_canary`` advances, promotes or rolls back
  (at 100 %, with no workload left on the champion, against the champion's means of the last
  window that had both arms);
- A/B: a fixed split over the whole test period, differences with 95 % confidence intervals;
- shadow: every workload on both runs, paired differences.

Simplification: a workload that moves to the challenger at a step is scored on the challenger's
continuous run (the transient of switching forecasters mid-run is not simulated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
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
) -> dict[str, Any]:
    """Replay every trace with both forecasters, then run canary, A/B and shadow on the outcomes."""
    if champion == challenger:
        raise UserError(f"Champion and challenger are both {champion!r}.", "Pick two different forecasters.")
    runs: dict[str, tuple[Any, Any, Any]] = {}
    skipped: dict[str, str] = {}
    for name in traces:
        try:
            setup = prepare(load_series(name), name=name)
        except UserError as exc:
            skipped[name] = exc.message
            continue
        pol = replay_policy_object(setup, name="rollout")
        arms = []
        for model_name in (champion, challenger):
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

    # Canary: one window per step.
    history: list[dict[str, Any]] = []
    share, state = params.steps[0], "running"
    # The champion's means from the last window that had both arms: at a share of 100 % no workload
    # is left on the champion, and the challenger's window is compared with them (as RolloutBook does).
    reference: dict[str, float] | None = None
    n_steps = len(params.steps)
    for k in range(n_steps):
        champ: list[Outcome] = []
        chal: list[Outcome] = []
        for name, (s, a, b) in runs.items():
            bounds = np.linspace(0, s.demand.size, n_steps + 1).astype(int)
            i0, i1 = int(bounds[k]), int(bounds[k + 1])
            if assign(name, share, salt) == "challenger":
                chal.append(_outcome(name, s, b, i0, i1))
            else:
                champ.append(_outcome(name, s, a, i0, i1))
        d = decide_canary(params, share, champ, chal, reference)
        if champ and math.isfinite(d.summary.get("champion_violation_fraction", math.nan)):
            reference = dict(d.summary)
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
            state = "rolled-back"
            break
        if d.action == "promote":
            state = "promoted"
            break
        share = d.share
    whole = {name: (s, a, b) for name, (s, a, b) in runs.items()}
    ab_champ = [
        _outcome(n, s, a, 0, s.demand.size) for n, (s, a, _) in whole.items() if assign(n, split, salt) != "challenger"
    ]
    ab_chal = [
        _outcome(n, s, b, 0, s.demand.size) for n, (s, _, b) in whole.items() if assign(n, split, salt) == "challenger"
    ]
    sh_champ = [_outcome(n, s, a, 0, s.demand.size) for n, (s, a, _) in whole.items()]
    sh_chal = [_outcome(n, s, b, 0, s.demand.size) for n, (s, _, b) in whole.items()]
    return {
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
