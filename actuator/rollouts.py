"""Rollouts of a challenger (a model version or a policy) against the champion: canary, A/B, shadow.

The decision logic is pure and takes per-workload measured outcomes of each arm, so the same
functions drive a real cluster (outcomes from Prometheus and the journal), the simulated cluster
of ``bench replay``, and the tests:

- ``assign(workload, share, salt)``: a stable hash puts a workload in the challenger's arm when
  its hash falls below ``share``; raising the share only ever moves workloads *to* the challenger.
- ``decide_canary``: one-sided Welch t bounds per metric (the error rate split over the looks),
  on each workload's change from its baseline when the outcomes have baselines; rolls back when
  the challenger is shown worse beyond a margin, advances (promotes after the last step below 1.0)
  when it is shown no worse, otherwise waits a bounded number of windows and then rolls back.
- ``ab_report``: the difference of means (challenger minus champion) per metric with a Welch
  confidence interval (Student t, Welch–Satterthwaite degrees of freedom); the split stays fixed.
- ``shadow_report``: the challenger plans for the same workloads without acting; the paired
  difference per metric with its Student t confidence interval (n - 1 degrees of freedom).

``RolloutBook`` keeps the state in storage (``Store.create_rollout`` / ``update_rollout``) so a
rollout survives restarts. Every write is conditional on the rollout being as it was read (still
running, same share, not updated since), so concurrent commands never undo each other's change.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from statistics import NormalDist, fmean, pvariance
from typing import Any, Literal

from scaleahead.errors import DataError, UserError
from storage import Store
from storage.store import RolloutRunning, StoredRollout

Mode = Literal["canary", "ab", "shadow"]


def iso_utc(t: float) -> str:
    """``t`` (epoch s) as ``2026-12-06T07:00:00Z``."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Arm = Literal["champion", "challenger"]
METRICS = ("violation_fraction", "cost_per_demand", "forecast_error")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One workload's measured outcome over the evaluation window (lower is better for each).

    ``violation_fraction``: share of steps with demand above ready capacity; ``cost_per_demand``:
    replica-seconds per unit of served demand (comparable across workloads of different size);
    ``forecast_error``: the median forecast's MAE relative to seasonal-naive on the same origins.
    ``baseline_*``: the same workload's outcome under the champion in a window before the rollout
    (NaN: not recorded); a canary compares each workload's change from it when every compared
    workload has one (difference in differences).
    """

    workload: str
    violation_fraction: float
    cost_per_demand: float
    forecast_error: float = float("nan")
    baseline_violation_fraction: float = float("nan")
    baseline_cost_per_demand: float = float("nan")
    baseline_forecast_error: float = float("nan")


#: ``--max-violation-increase``'s default until 2026-12-06 (``CanaryParams.from_stored``).
OLD_DEFAULT_VIOLATION_MARGIN = 0.002


@dataclass(frozen=True, slots=True)
class CanaryParams:
    """Share steps, the margins by which the challenger may be worse, and the test's error rate.

    ``max_violation_increase`` is absolute (a fraction of steps); the cost and error margins are
    relative (compared on a log scale as log(1 + margin)). ``alpha``: the one-sided error rate of
    the whole canary, split evenly (Bonferroni) over its looks (steps below 1.0 times
    1 + ``max_inconclusive_windows``) and metrics. Stored rollouts without the newer keys read
    them with these defaults (``CanaryParams.from_stored``)."""

    steps: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0)
    max_violation_increase: float = 0.02
    max_cost_increase: float = 0.05
    max_error_increase: float = 0.05
    min_workloads_per_arm: int = 3
    window_s: float = 3600.0
    alpha: float = 0.05
    max_inconclusive_windows: int = 3

    @classmethod
    def from_stored(cls, p: Mapping[str, Any]) -> CanaryParams:
        """The params of a stored rollout; a key it lacks (stored before it existed) takes its default.

        A rollout stored before 2026-12-06 (no ``alpha``) with the violation margin of that day's
        default, 0.002, reads today's default, 0.02: 0.002 was a threshold on plain means then, and
        as a margin the challenger must be *shown* within, it could almost never be (a review found
        such canaries rolled back as inconclusive about 40 % of the time with identical models).
        Any other stored margin is kept as given."""
        d = cls()
        violation = p.get("max_violation_increase", d.max_violation_increase)
        if "alpha" not in p and violation == OLD_DEFAULT_VIOLATION_MARGIN:
            violation = d.max_violation_increase
        return cls(
            steps=tuple(p.get("steps", d.steps)),
            max_violation_increase=violation,
            max_cost_increase=p.get("max_cost_increase", d.max_cost_increase),
            max_error_increase=p.get("max_error_increase", d.max_error_increase),
            min_workloads_per_arm=max(2, int(p.get("min_workloads_per_arm", d.min_workloads_per_arm))),
            window_s=p.get("window_s", d.window_s),
            alpha=p.get("alpha", d.alpha),
            max_inconclusive_windows=p.get("max_inconclusive_windows", d.max_inconclusive_windows),
        )

    def looks(self) -> int:
        """How many windows the canary may test: (1 + max_inconclusive_windows) per step below 1.0."""
        return max(1, len([s for s in self.steps if s < 1.0 - 1e-12])) * (1 + max(0, self.max_inconclusive_windows))


@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["advance", "promote", "rollback", "wait"]
    share: float
    reason: str
    summary: Mapping[str, float] = field(default_factory=dict)


class TooLargeToCompare(DataError):
    """An A/B or shadow comparison of ``metrics`` whose mean, difference or interval is not a finite
    float (values near the float limit, 1.8e308): it is refused, and nothing is recorded."""

    def __init__(self, metrics: Sequence[str], what: str = "", fix: str = "") -> None:
        self.metrics = list(metrics)
        super().__init__(
            what
            or f"The {', '.join(self.metrics)} outcomes are too large to compare: the difference or its "
            "confidence interval is not a finite number.",
            fix or "Check the measurements (a unit mix-up?); nothing was recorded.",
        )


#: ``RolloutBook.promote`` / ``evaluate``'s check of a rollout about to be promoted: raises a
#: ``UserError`` (nothing is recorded) when its challenger must not become the champion.
PromotionCheck = Callable[[StoredRollout], None]


@dataclass(frozen=True, slots=True)
class Difference:
    """Challenger minus champion for one metric, with a confidence interval."""

    metric: str
    champion: float
    challenger: float
    difference: float
    low: float
    high: float
    n_champion: int
    n_challenger: int

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0


def assign(workload: str, share: float, salt: str = "") -> Arm:
    """The arm of ``workload`` at challenger share ``share`` (stable, monotone in ``share``)."""
    digest = hashlib.sha256(f"{salt}\x00{workload}".encode()).digest()
    position = int.from_bytes(digest[:8], "big") / 2.0**64
    return "challenger" if position < share else "champion"


def _scale(*groups: Iterable[float]) -> float:
    """A power of two near the largest magnitude in ``groups`` (1 when all are 0): dividing finite
    values by it, and multiplying back, is exact (short of subnormals), and keeps sums, squares and
    variances of the scaled values from overflowing (``fmean([1e308, 1e308])`` overflows in fsum,
    ``pvariance([0, 1e160])`` in its exact division)."""
    top = max((abs(v) for g in groups for v in g), default=0.0)
    return math.ldexp(1.0, math.frexp(top)[1] - 1) if top > 0.0 else 1.0  # top / scale in [1, 2)


def _fmean(values: Sequence[float]) -> float:
    """The mean of finite ``values`` without overflow (NaN for none): between the least and the greatest."""
    if not values:
        return float("nan")
    s = _scale(values)
    return fmean(v / s for v in values) * s


def _mean(outcomes: Sequence[Outcome], metric: str) -> float:
    return _fmean([getattr(o, metric) for o in outcomes if math.isfinite(getattr(o, metric))])


#: The canary's metrics: (name, log scale, the params field of its margin, what "worse" means).
_CANARY_METRICS = (
    ("violation_fraction", False, "max_violation_increase", "violates the SLO more"),
    ("cost_per_demand", True, "max_cost_increase", "costs more per unit of demand"),
    ("forecast_error", True, "max_error_increase", "forecasts worse"),
)


def _log_floor(outcomes: Iterable[Outcome], metric: str) -> float:
    """What a log-scale metric adds before its log: a thousandth of the median positive value of
    ``metric`` and its baselines over ``outcomes`` (both arms), so a 0 (no replica-seconds, no
    error) is compared as a large step down rather than left out; 0 when there is no zero."""
    values = [
        v
        for o in outcomes
        for v in (getattr(o, metric), getattr(o, f"baseline_{metric}"))
        if math.isfinite(v) and v >= 0.0
    ]
    if not any(v == 0.0 for v in values):
        return 0.0
    positive = sorted(v for v in values if v > 0.0)
    return 1e-3 * positive[len(positive) // 2] if positive else 1.0


def _test_values(outcomes: Sequence[Outcome], metric: str, log: bool, paired: bool, floor: float = 0.0) -> list[float]:
    """Per workload: the metric (its log for cost and error, of the value plus ``floor``), minus its
    baseline when ``paired``; workloads without a finite value (or, on a log scale, a negative one,
    or 0 with no ``floor``) are left out. Until 2026-12-06 a 0 was always left out, so a cost going
    from a baseline of 0 to 5 did not count against the challenger (found by a review)."""
    out = []
    for o in outcomes:
        v = getattr(o, metric)
        b = getattr(o, f"baseline_{metric}") if paired else 0.0 if not log else 1.0 - floor
        if not (math.isfinite(v) and math.isfinite(b)) or (log and (v + floor <= 0.0 or b + floor <= 0.0)):
            continue
        out.append(math.log(v + floor) - math.log(b + floor) if log else v - b)
    return out


def _with_baseline(outcomes: Iterable[Outcome], metric: str) -> int:
    """How many of ``outcomes`` have ``metric`` and its baseline."""
    return sum(
        1 for o in outcomes if math.isfinite(getattr(o, metric)) and math.isfinite(getattr(o, f"baseline_{metric}"))
    )


def _has_baselines(champion: Sequence[Outcome], challenger: Sequence[Outcome], metric: str, need: int) -> bool:
    """Whether ``metric`` is tested paired: at least ``need`` workloads of each arm have it and a
    baseline (the others are then left out of that metric). Until 2026-12-06 one workload without a
    baseline (new, or idle in the baseline window) made the metric unpaired for all (an audit: an
    identical challenger then went from "shown no worse" to inconclusive)."""
    return min(_with_baseline(champion, metric), _with_baseline(challenger, metric)) >= need


def _welch_bounds(a: Sequence[float], b: Sequence[float], level: float) -> tuple[float, float, float]:
    """b's mean minus a's, with the one-sided ``level`` Welch t bounds (low, high) around it."""
    s = _scale(a, b)
    xa, xb = [v / s for v in a], [v / s for v in b]
    ma, mb = fmean(xa), fmean(xb)
    va = pvariance(xa) * len(xa) / (len(xa) - 1)
    vb = pvariance(xb) * len(xb) / (len(xb) - 1)
    se = math.sqrt(va / len(xa) + vb / len(xb))
    t = t_quantile(level, welch_df(va, len(xa), vb, len(xb)))
    d = mb - ma
    return d * s, (d - t * se) * s, (d + t * se) * s


def decide_canary(
    params: CanaryParams,
    share: float,
    champion: Sequence[Outcome],
    challenger: Sequence[Outcome],
    reference: Mapping[str, Any] | None = None,
    inconclusive: int = 0,
    compared: bool = False,
) -> Decision:
    """Advance, promote, roll back or wait, from the two arms' outcomes over one window.

    Per metric, the challenger-minus-champion difference of the per-workload values (violation
    fraction; log cost per demand and log forecast error; each workload's change from its
    baseline when every compared workload has one) gets a one-sided Welch t bound at level
    1 - alpha / (looks x metrics). Rolled back when a metric's lower bound is above its margin
    (shown worse beyond it); advanced (promoted after the last step below 1.0) when every upper
    bound is below its margin (shown no worse: non-inferiority); otherwise ``wait`` another
    window at the same share, and after ``inconclusive`` == ``max_inconclusive_windows`` such
    windows before this one, rolled back as not shown to be no worse (the champion is the
    known-good one). A step whose arms have fewer than ``min_workloads_per_arm`` workloads
    advances without a comparison; a canary never promotes unless a comparison passed (this
    window or ``compared``, an earlier step's). At 100 % nothing is left to compare with: it
    waits for ``rollout promote`` or ``abort``. ``reference`` is accepted for compatibility
    and ignored (comparing with an earlier window of the champion mixes in the time of day).
    """
    del reference
    summary: dict[str, float] = {
        f"{arm}_{m}": _mean(o, m) for arm, o in (("champion", champion), ("challenger", challenger)) for m in METRICS
    }
    if share >= 1.0 - 1e-12:
        return Decision(
            "wait",
            share,
            "at 100 % no workload is left on the champion to compare with: promote or abort it by hand "
            "(scaleahead rollout promote|abort)",
            summary,
        )
    later = [s for s in params.steps if share + 1e-12 < s < 1.0 - 1e-12]
    need = max(2, params.min_workloads_per_arm)
    if len(champion) < need or len(challenger) < need:
        few = (
            f"too few workloads to compare at share {share:.0%} ({len(champion)} champion, "
            f"{len(challenger)} challenger; need {need} each)"
        )
        if later:
            return Decision("advance", later[0], f"{few}: advancing to {later[0]:.0%} without a comparison", summary)
        if compared:
            return Decision("promote", 1.0, f"{few}; the challenger passed an earlier step: promoted", summary)
        return Decision(
            "rollback",
            0.0,
            f"{few}, and no step had enough: never compared, so not promoted (use larger --steps, "
            "or shadow mode, which compares the same workloads)",
            summary,
        )
    tested = [
        (m, log, getattr(params, field), worse, _has_baselines(champion, challenger, m, need))
        for m, log, field, worse in _CANARY_METRICS
    ]
    floors = {m: _log_floor([*champion, *challenger], m) if log else 0.0 for m, log, _, _, _ in tested}
    values = {
        m: (_test_values(champion, m, log, p, floors[m]), _test_values(challenger, m, log, p, floors[m]))
        for m, log, _, _, p in tested
    }
    tested = [t for t in tested if len(values[t[0]][0]) >= 2 and len(values[t[0]][1]) >= 2]
    level = 1.0 - params.alpha / (params.looks() * max(1, len(tested)))
    summary["level"] = level
    passed: list[str] = []
    open_: list[str] = []
    for m, log, margin, worse, paired in tested:
        bound = math.log1p(margin) if log else margin
        d, low, high = _welch_bounds(*values[m], level)
        summary.update({f"{m}_difference": d, f"{m}_low": low, f"{m}_high": high, f"{m}_margin": bound})
        summary[f"{m}_paired"] = float(paired)
        if paired:  # the workloads with the metric but no baseline, left out of the paired test
            measured = sum(1 for o in [*champion, *challenger] if math.isfinite(getattr(o, m)))
            summary[f"{m}_without_baseline"] = float(measured - _with_baseline([*champion, *challenger], m))
        scale = " (log)" if log else ""
        if low > bound:
            return Decision(
                "rollback",
                0.0,
                f"challenger {worse}: difference{scale} {d:.4g}, lower bound {low:.4g} above the margin "
                f"{bound:.4g} (one-sided {level:.2%})",
                summary,
            )
        (passed if high < bound else open_).append(f"{m}{scale} upper bound {high:.4g} vs margin {bound:.4g}")
    if not tested:
        open_.append("no metric has two workloads with outcomes in each arm")
    if not open_:
        if later:
            return Decision(
                "advance", later[0], f"challenger shown no worse at {share:.0%}: advancing to {later[0]:.0%}", summary
            )
        return Decision("promote", 1.0, "challenger shown no worse at every compared step: promoted", summary)
    if inconclusive >= params.max_inconclusive_windows:
        return Decision(
            "rollback",
            0.0,
            f"not shown to be no worse after {inconclusive + 1} windows at {share:.0%} without a conclusion "
            f"(this window's: {'; '.join(open_)}): rolled back, the champion being the known-good one",
            summary,
        )
    return Decision(
        "wait",
        share,
        f"inconclusive at {share:.0%} ({'; '.join(open_)}): another window at the same share "
        f"({inconclusive + 1} of {params.max_inconclusive_windows + 1})",
        summary,
    )


def _fallback_gap(share: Mapping[str, float] | None) -> float:
    """How much more often the challenger's model made no forecast than the champion's (-inf: not
    known, e.g. outcomes from a CSV or no scored step of the challenger)."""
    if not share:
        return -math.inf
    chal, champ = share.get("challenger", math.nan), share.get("champion", math.nan)
    if not math.isfinite(chal):
        return -math.inf
    return chal - (champ if math.isfinite(champ) else 0.0)


def _fallback_rollback(
    params: CanaryParams,
    share: float,
    champion: Sequence[Outcome],
    challenger: Sequence[Outcome],
    fallback_share: Mapping[str, float],
) -> Decision:
    summary: dict[str, float] = {
        f"{arm}_{m}": _mean(o, m) for arm, o in (("champion", champion), ("challenger", challenger)) for m in METRICS
    }
    chal = fallback_share.get("challenger", math.nan)
    champ = fallback_share.get("champion", math.nan)
    summary.update(challenger_fallback_share=chal, champion_fallback_share=champ)
    return Decision(
        "rollback",
        0.0,
        f"the challenger made no forecast in {chal:.1%} of its measured steps at {share:.0%} (the champion in "
        f"{champ if math.isfinite(champ) else 0.0:.1%}): {_fallback_gap(fallback_share) * 100:.3g} points more, above "
        f"the margin of {params.max_violation_increase * 100:g} points (maxViolationIncrease "
        f"{params.max_violation_increase:g}): its arm ran on the champion's forecasts or the policies' fallbacks, so "
        "its outcomes are not its own; rolled back",
        summary,
    )


def not_measured(
    params: CanaryParams, share: float, champion: Sequence[Outcome], challenger: Sequence[Outcome], inconclusive: int
) -> Decision:
    """A window of measured outcomes (``RolloutBook.evaluate(measured=True)``) in which an arm has
    fewer than ``min_workloads_per_arm`` workloads measured for enough of it: inconclusive (another
    window at the same share), and after ``max_inconclusive_windows`` such windows rolled back. Never
    an advance or promotion: a Prometheus or database outage is not evidence that the challenger
    is no worse (found by an audit: the daemon promoted a canary on windows with no rows at all)."""
    need = max(2, params.min_workloads_per_arm)
    summary: dict[str, float] = {
        f"{arm}_{m}": _mean(o, m) for arm, o in (("champion", champion), ("challenger", challenger)) for m in METRICS
    }
    few = (
        f"too few workloads measured at {share:.0%} ({len(champion)} champion, {len(challenger)} challenger "
        f"measured for enough of the window; need {need} each: was the loop, Prometheus or the database down?)"
    )
    if inconclusive >= params.max_inconclusive_windows:
        return Decision("rollback", 0.0, f"{few} after {inconclusive + 1} windows: rolled back, nothing shown", summary)
    return Decision(
        "wait",
        share,
        f"{few}: another window at the same share ({inconclusive + 1} of {params.max_inconclusive_windows + 1})",
        summary,
    )


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz's method)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)  # the fraction converges fast on this side
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` (> 0, not necessarily whole)
    degrees of freedom, e.g. ``t_quantile(0.975, 5)`` = 2.5706. The CDF is exact (through the
    incomplete beta function) and inverted by bisection: no scipy needed."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t quantile of p={p}, df={df}: p must be in (0, 1) and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if math.isinf(df):
        return NormalDist().inv_cdf(p)

    def upper(t: float) -> float:  # P(T > t), t >= 0
        return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper(hi) > 1.0 - p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if upper(mid) > 1.0 - p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2.0


def welch_df(va: float, na: int, vb: float, nb: int) -> float:
    """Welch–Satterthwaite degrees of freedom of the difference of two means (sample variances
    ``va``, ``vb`` of ``na``, ``nb`` values); ``na + nb - 2`` when both variances are 0."""
    a, b = va / na, vb / nb
    if a + b <= 0.0:
        return float(na + nb - 2)
    # (a + b)^2 / (a^2 / (na - 1) + b^2 / (nb - 1)), as shares of a + b: no square over- or underflows
    r = a / (a + b)
    return 1.0 / (r * r / (na - 1) + (1.0 - r) * (1.0 - r) / (nb - 1))


def ab_report(champion: Sequence[Outcome], challenger: Sequence[Outcome], confidence: float = 0.95) -> list[Difference]:
    """Per metric: mean difference (challenger - champion) with a Welch confidence interval.

    The interval is Student's t with Welch–Satterthwaite degrees of freedom: with a handful of
    workloads per arm a normal (z) interval is far too narrow (at two per arm it called about a
    fifth of equal-mean comparisons "significant" instead of 5 %)."""
    out: list[Difference] = []
    for m in METRICS:
        a = [getattr(o, m) for o in champion if math.isfinite(getattr(o, m))]
        b = [getattr(o, m) for o in challenger if math.isfinite(getattr(o, m))]
        if len(a) < 2 or len(b) < 2:
            continue  # one workload shows no spread: an interval from it would claim a certainty it lacks
        # In units of a power of two near the largest value (``_scale``): exact, and no overflow;
        # the two-sided interval at ``confidence`` is the one-sided bounds at 0.5 + confidence / 2.
        s = _scale(a, b)
        d, low, high = _welch_bounds(a, b, 0.5 + confidence / 2)
        ma, mb = fmean(v / s for v in a) * s, fmean(v / s for v in b) * s
        out.append(Difference(m, ma, mb, d, low, high, len(a), len(b)))
    return out


def shadow_report(
    champion: Sequence[Outcome], challenger: Sequence[Outcome], confidence: float = 0.95
) -> list[Difference]:
    """Paired per workload (the challenger planned the same workloads without acting): the mean
    difference with a Student t interval of n - 1 degrees of freedom (n pairs)."""
    by_wl = {o.workload: o for o in champion}
    pairs = [(by_wl[o.workload], o) for o in challenger if o.workload in by_wl]
    out: list[Difference] = []
    for m in METRICS:
        ds = [
            (getattr(a, m), getattr(b, m))
            for a, b in pairs
            if math.isfinite(getattr(a, m)) and math.isfinite(getattr(b, m))
        ]
        if len(ds) < 2:
            continue  # one pair shows no spread (see ab_report)
        # In units of a power of two near the largest value (``_scale``): exact, and no overflow.
        s = _scale((a for a, _ in ds), (b for _, b in ds))
        diffs = [b / s - a / s for a, b in ds]
        sd = math.sqrt(pvariance(diffs) * len(diffs) / (len(diffs) - 1))
        mean = fmean(diffs)
        half = t_quantile(0.5 + confidence / 2, len(diffs) - 1) * sd / math.sqrt(len(diffs))
        out.append(
            Difference(
                m,
                fmean(a / s for a, _ in ds) * s,
                fmean(b / s for _, b in ds) * s,
                mean * s,
                (mean - half) * s,
                (mean + half) * s,
                len(ds),
                len(ds),
            )
        )
    return out


def split_outcomes(outcomes: Mapping[str, Outcome], share: float, salt: str) -> tuple[list[Outcome], list[Outcome]]:
    """Split per-workload outcomes by ``assign`` (for canary/A-B on a single simulated run)."""
    champ = [o for k, o in sorted(outcomes.items()) if assign(k, share, salt) == "champion"]
    chal = [o for k, o in sorted(outcomes.items()) if assign(k, share, salt) == "challenger"]
    return champ, chal


@dataclass(frozen=True, slots=True)
class RolloutView:
    """What the control loop needs of a running rollout: which arm plans (and acts) for a workload."""

    mode: Mode
    share: float
    salt: str
    group: str | None = None  # the rollout group (spec.rolloutGroup) it covers; None: every workload
    #: The challenger's model version (registry id) when its arm is a model version, so that the
    #: forecasts it makes are stored and scored as that version's (set by the daemon).
    challenger_version: int | None = None
    #: The rollout's id in storage (``scaleahead.outcomes`` records the outcomes under it); None: not stored.
    rollout_id: int | None = None

    def covers(self, rollout_group: str) -> bool:
        """Whether a workload of policies in ``rollout_group`` takes part in this rollout."""
        return self.group is None or self.group == rollout_group

    def arm(self, workload: str) -> Arm:
        """The arm whose forecasts drive ``workload`` (shadow: the champion acts everywhere)."""
        return "champion" if self.mode == "shadow" else assign(workload, self.share, self.salt)


class RolloutBook:
    """Rollout state in storage: start, evaluate, promote, abort; one running rollout per group."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def running(self, group: str) -> StoredRollout | None:
        found = self.store.rollouts(group=group, state="running")
        return found[-1] if found else None

    def start(
        self,
        group: str,
        mode: Mode,
        champion: str,
        challenger: str,
        now: float,
        canary: CanaryParams | None = None,
        split: float = 0.5,
        results: dict[str, Any] | None = None,
        supersede: tuple[StoredRollout, dict[str, Any]] | None = None,
    ) -> int:
        """Start a rollout of ``challenger`` in ``group``; returns its id.

        ``results``: recorded with the new rollout in its insert (retraining's marker: never a
        rollout without it). ``supersede``: the group's running rollout as read and the results to
        record with it; it becomes ``superseded`` in the same transaction (``Store.create_rollout``).
        Another running rollout in the group is a ``UserError``, also when one is started at the
        same time (the database's unique index refuses the second insert)."""
        if mode not in ("canary", "ab", "shadow"):
            raise UserError(f"Rollout mode {mode!r} is unknown.", "Use canary, ab or shadow.")
        if not 0.0 < split < 1.0:
            raise UserError(f"--split {split} is not a share strictly between 0 and 1.", "Use e.g. --split 0.5.")
        current = self.running(group)
        if current is not None and (supersede is None or supersede[0].id != current.id):
            raise self._still_running(group, current)
        if champion == challenger:
            raise UserError(f"The challenger {challenger!r} is already the champion.", "Pick another challenger.")
        params = asdict(canary or CanaryParams())
        params["split"] = split
        params["salt"] = f"{group}:{challenger}"
        share = {"canary": params["steps"][0], "ab": split, "shadow": 0.0}[mode]
        try:
            return self.store.create_rollout(
                group, mode, champion, challenger, now, share=share, params=params, results=results, supersede=supersede
            )
        except RolloutRunning:
            raise self._still_running(group, self.running(group)) from None

    @staticmethod
    def _still_running(group: str, current: StoredRollout | None) -> UserError:
        which = f"Rollout {current.id} ({current.mode}, challenger {current.challenger})" if current else "A rollout"
        return UserError(
            f"{which} is still running in group {group!r}.",
            "Promote or abort it first (scaleahead rollout promote|abort --group G).",
        )

    def get(self, group: str, rollout_id: int | None = None) -> StoredRollout:
        # by id, whatever its group (as before), without reading every rollout
        rows = self.store.rollouts(ids=[rollout_id]) if rollout_id is not None else self.store.rollouts(group=group)
        if not rows:
            # a typo in --group said to start a rollout there (an operator audit): the groups that have one
            groups = sorted({r.group for r in self.store.rollouts()})
            more = " ..." if len(groups) > 20 else ""
            known = f" Groups with rollouts: {', '.join(groups[:20])}{more}." if groups else ""
            raise UserError(
                f"No rollout in group {group!r}.{known}",
                "Check --group (a policy's spec.rolloutGroup), or start one with `scaleahead rollout start`.",
            )
        return rows[-1]

    def view(self, group: str) -> RolloutView | None:
        """The running rollout of ``group`` for the loop, or None."""
        r = self.running(group)
        if r is None:
            return None
        return RolloutView(r.mode, r.share, str(r.params.get("salt", "")), group, rollout_id=r.id)  # type: ignore[arg-type]

    def arm(self, rollout: StoredRollout, workload: str) -> Arm:
        """Which arm acts for ``workload`` (shadow: always the champion)."""
        if rollout.state != "running" or rollout.mode == "shadow":
            return "challenger" if rollout.state == "promoted" else "champion"
        return assign(workload, rollout.share, str(rollout.params.get("salt", "")))

    def evaluate(
        self,
        rollout: StoredRollout,
        outcomes: Mapping[Arm, Sequence[Outcome]],
        now: float,
        check_promotion: PromotionCheck | None = None,
        measured: bool = False,
        fallback_share: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """Feed measured outcomes; a canary advances/promotes/rolls back; A/B and shadow report.

        ``measured``: the outcomes are the daemon's own (``scaleahead.outcomes``) and the group
        has enough workloads in each arm, so an arm with too few outcomes means too few were
        *measured* (an outage): such a window is inconclusive (``not_measured``), never an advance
        without a comparison. ``fallback_share``: per arm, the share of its measured steps in
        which its model made no forecast; a canary whose challenger's exceeds the champion's by
        more than ``max_violation_increase`` is rolled back (its arm ran on the champion's
        forecasts or the policies' fallbacks, so its outcomes are not its own).

        The decision is recorded only if the rollout is still as ``rollout`` was read (running, same
        share, not updated since): an abort, supersede, promotion or another evaluation committed
        meanwhile is never overwritten; instead a ``UserError`` (``RolloutChanged``) and nothing is
        recorded. A canary that decides to promote first calls ``check_promotion`` (if given): its
        ``UserError`` records nothing, the rollout stays as it was. An A/B or shadow comparison
        that is not finite (values near the float limit) is ``TooLargeToCompare``, nothing recorded."""
        if rollout.state != "running":
            raise UserError(f"Rollout {rollout.id} is {rollout.state}, not running.", "Start a new one.")
        champ, chal = list(outcomes.get("champion", ())), list(outcomes.get("challenger", ()))
        results: dict[str, Any] = dict(rollout.results)
        entry: dict[str, Any]
        history = list(results.get("history", []))
        if rollout.mode == "canary":
            params = CanaryParams.from_stored(rollout.params)
            at_share = []  # this share's entries since it was set, newest first
            for h in reversed(history):
                if h.get("decision") == "advance":
                    break
                at_share.append(h)
            inconclusive = sum(1 for h in at_share if h.get("inconclusive"))
            compared = any(h.get("compared") for h in history)
            # The share in force since the last advance (or the start) or the last inconclusive
            # window: outcomes must cover a whole window of it, else a canary could run through
            # every step in as many quick calls.
            since = next(
                (h["at"] for h in reversed(history) if h.get("decision") == "advance" or h.get("inconclusive")),
                rollout.started_at,
            )
            decided = False
            if now < since - 1.0:
                # A clock behind the one that set the share (another machine's): no negative time.
                d = Decision(
                    "wait",
                    rollout.share,
                    f"this clock is {since - now:.0f} s before the time the challenger's {rollout.share:.0%} share "
                    f"was set ({iso_utc(since)}): check this machine's clock against the one that wrote it; "
                    "no time in the window is counted until it has passed",
                )
            elif now - since < params.window_s - 1e-6:
                d = Decision(
                    "wait",
                    rollout.share,
                    f"the challenger has run at {rollout.share:.0%} for {max(now - since, 0.0):.0f} s of the "
                    f"{params.window_s:.0f} s window; a shorter time does not decide",
                )
            elif rollout.share < 1.0 - 1e-12 and _fallback_gap(fallback_share) > max(
                params.max_violation_increase, 0.0
            ):
                d = _fallback_rollback(params, rollout.share, champ, chal, fallback_share or {})
                decided = True
            elif (
                measured
                and rollout.share < 1.0 - 1e-12
                and min(len(champ), len(chal)) < max(2, params.min_workloads_per_arm)
            ):
                d = not_measured(params, rollout.share, champ, chal, inconclusive)
                decided = True
            else:
                d = decide_canary(params, rollout.share, champ, chal, None, inconclusive, compared)
                decided = True
            entry = {
                "at": now,
                "share": rollout.share,
                "decision": d.action,
                "reason": d.reason,
                "champion_workloads": len(champ),
                "challenger_workloads": len(chal),
                **d.summary,
            }
            if decided and rollout.share < 1.0 - 1e-12:
                if d.action == "wait":
                    entry["inconclusive"] = True
                elif "level" in d.summary and d.action in ("advance", "promote"):
                    entry["compared"] = True
            history.append(entry)
            results.update(last=entry, history=history)
            state = {"promote": "promoted", "rollback": "rolled-back"}.get(d.action, "running")
            if state == "promoted":
                if check_promotion is not None:
                    check_promotion(rollout)
                self._promote(rollout, now, results)
            else:
                self.store.update_rollout(rollout, now, state=state, share=d.share, results=results)
            return entry
        report = ab_report(champ, chal) if rollout.mode == "ab" else shadow_report(champ, chal)
        overflowed = [
            x.metric
            for x in report
            if not all(math.isfinite(v) for v in (x.champion, x.challenger, x.difference, x.low, x.high))
        ]
        if overflowed:
            raise TooLargeToCompare(overflowed)
        entry = {"at": now, "differences": [asdict(x) | {"significant": x.significant} for x in report]}
        if not report:
            need = "two workloads in each arm" if rollout.mode == "ab" else "two workloads with outcomes in both arms"
            entry["note"] = (
                f"nothing to compare: {len(champ)} champion and {len(chal)} challenger outcome(s); "
                f"a confidence interval needs at least {need}"
            )
        history.append(entry)
        results.update(last=entry, history=history)
        self.store.update_rollout(rollout, now, results=results)
        return entry

    def promote(self, group: str, now: float, check: PromotionCheck | None = None) -> StoredRollout:
        """Promote ``group``'s running rollout; ``check`` (if given) first, whose ``UserError``
        records nothing (the rollout stays running)."""
        r = self._require_running(group)
        if check is not None:
            check(r)
        self._promote(r, now)
        return self.get(group)

    def _promote(self, rollout: StoredRollout, now: float, results: dict[str, Any] | None = None) -> None:
        """Promoted, in one transaction with the registry when champion/challenger are model version
        ids: challenger -> champion, champion -> retired."""
        challenger = int(rollout.challenger) if rollout.challenger.isdigit() else None
        champion = int(rollout.champion) if challenger is not None and rollout.champion.isdigit() else None
        self.store.promote_rollout(rollout, now, challenger, champion, results)

    def abort(self, group: str, now: float) -> StoredRollout:
        r = self._require_running(group)
        self.store.update_rollout(r, now, state="aborted", share=0.0)
        return self.get(group)

    def _require_running(self, group: str) -> StoredRollout:
        r = self.running(group)
        if r is None:
            raise UserError(f"No running rollout in group {group!r}.", "See `scaleahead rollout status`.")
        return r
