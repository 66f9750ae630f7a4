"""The learned start-up delay (planner/startup.py): quantile of recent readiness times, with guards."""

from __future__ import annotations

import math

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from planner_helpers import service_policy

from planner.startup import estimate_for, estimate_startup
from scaleahead.errors import ConfigError
from scaleahead.policy import StartupLearning, parse_policies


def learning(**kw: object) -> StartupLearning:
    return StartupLearning.model_validate(kw)


def test_too_few_samples_keep_the_configured_delay_and_say_how_many_are_needed() -> None:
    est = estimate_startup([70.0, 80.0], 60.0)
    assert (est.seconds, est.learned, est.used) == (60.0, False, 2)
    assert math.isnan(est.observed_seconds)
    assert est.sentence == "start-up 60 s configured: 2 readiness times observed, 5 needed to learn it"


def test_enough_samples_give_their_p90_rounded_up_to_a_whole_second() -> None:
    samples = [float(x) for x in range(61, 81)]  # 61 .. 80 s
    est = estimate_startup(samples, 60.0)
    # method 'higher': index ceil(0.9 * 19) = 18 -> the 19th smallest, 79 s
    assert (est.seconds, est.learned, est.observed_seconds, est.used) == (79.0, True, 79.0, 20)
    assert est.sentence == "start-up 79 s learned: p90 of the last 20 readiness times (configured 60 s)"


def test_a_fractional_quantile_is_rounded_up_not_down() -> None:
    est = estimate_startup([73.2] * 5, 60.0)
    assert est.seconds == 74.0


def test_only_the_most_recent_window_of_samples_counts() -> None:
    old_slow, new_fast = [300.0] * 40, [90.0] * 10
    est = estimate_startup(old_slow + new_fast, 30.0, learning(window=10))
    assert (est.seconds, est.used) == (90.0, 10)
    assert estimate_startup(old_slow + new_fast, 30.0, learning(window=20)).seconds == 300.0


def test_nan_negative_and_absurd_samples_are_dropped_and_counted() -> None:
    samples = [float("nan"), -5.0, float("inf"), 5000.0, 80.0, 80.0, 80.0, 80.0, 80.0]
    est = estimate_startup(samples, 60.0, learning(maxSeconds=900))
    assert (est.seconds, est.used, est.dropped) == (80.0, 5, 4)
    assert "4 samples dropped (NaN, negative or above 900 s)" in est.sentence


def test_dropped_samples_do_not_count_toward_min_samples() -> None:
    est = estimate_startup([80.0, 80.0, float("nan"), -1.0, 1e9], 60.0)
    assert (est.seconds, est.learned, est.dropped) == (60.0, False, 3)
    assert "2 readiness times observed, 5 needed" in est.sentence


def test_a_shorter_learned_delay_does_not_replace_the_configured_one_by_default() -> None:
    est = estimate_startup([20.0] * 10, 60.0)
    assert (est.seconds, est.learned, est.observed_seconds) == (60.0, False, 20.0)
    assert est.sentence == (
        "start-up 60 s configured: p90 of the last 10 readiness times is 20 s, shorter, and allowShorter is off"
    )


def test_allow_shorter_lets_the_learned_delay_go_below_the_configured_one() -> None:
    est = estimate_startup([20.0] * 10, 60.0, learning(allowShorter=True))
    assert (est.seconds, est.learned) == (20.0, True)
    assert est.sentence == "start-up 20 s learned: p90 of the last 10 readiness times (configured 60 s)"


def test_learning_off_always_plans_with_the_configured_delay() -> None:
    est = estimate_startup([200.0] * 10, 60.0, learning(enabled=False))
    assert (est.seconds, est.learned) == (60.0, False)
    assert est.sentence == "start-up 60 s configured (learning off)"


def test_estimate_for_reads_the_policy_block_in_camel_case() -> None:
    pol = service_policy(startupSeconds=30, startupLearning={"quantile": 0.5, "minSamples": 3, "window": 10})
    est = estimate_for(pol.spec, [40.0, 50.0, 60.0])
    assert (est.seconds, est.configured_seconds) == (50.0, 30.0)
    assert "p50 of the last 3 readiness times" in est.sentence


def test_a_policy_with_min_samples_above_the_window_is_rejected_naming_the_field() -> None:
    text = """
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {name: web}
spec:
  target: {name: web}
  demand: {query: q}
  capacityPerReplica: 10
  startupLearning: {minSamples: 60, window: 50}
"""
    with pytest.raises(ConfigError, match=r"startupLearning.*minSamples \(60\) must not exceed window \(50\)"):
        parse_policies(text, "p.yaml")


# Mostly plausible readiness times (0-900 s), some NaN, infinite, negative or absurd ones, and half
# the lists long enough to learn from: with short lists of uniform draws over the whole range, 4
# examples in 5 had too few valid samples and the learned branches were reached by 1 in 10.
sample_st = st.one_of(
    st.floats(min_value=0, max_value=900, allow_nan=False),
    st.floats(min_value=0, max_value=900, allow_nan=False),
    st.floats(min_value=0, max_value=900, allow_nan=False),
    st.floats(min_value=-100, max_value=5000, allow_nan=False),
    st.just(float("nan")),
    st.just(float("inf")),
)
samples_st = st.one_of(st.lists(sample_st, max_size=80), st.lists(sample_st, min_size=10, max_size=80))


# The edges of "never below the configured delay unless allowed": learned exactly at it, learned at
# it after rounding 59.5 s up, one second shorter (kept unless allowShorter), every sample above maxSeconds.
@example(samples=[60.0] * 5, configured=60.0, q=0.9, min_samples=5, window=10, cap=900.0, shorter=False)
@example(samples=[59.5] * 5, configured=60.0, q=0.9, min_samples=5, window=10, cap=900.0, shorter=False)
@example(samples=[59.0] * 5, configured=60.0, q=0.9, min_samples=5, window=10, cap=900.0, shorter=False)
@example(samples=[59.0] * 5, configured=60.0, q=0.9, min_samples=5, window=10, cap=900.0, shorter=True)
@example(samples=[950.0] * 10, configured=60.0, q=0.9, min_samples=5, window=10, cap=900.0, shorter=False)
@settings(max_examples=200, deadline=None)
@given(
    samples=samples_st,
    configured=st.floats(min_value=0, max_value=600),
    q=st.floats(min_value=0.01, max_value=1.0),
    min_samples=st.integers(1, 10),
    window=st.integers(10, 60),
    cap=st.one_of(st.floats(min_value=1, max_value=2000), st.floats(min_value=900, max_value=2000)),
    shorter=st.booleans(),
)
def test_the_estimate_is_bounded_and_never_below_the_configured_delay_unless_allowed(
    samples: list[float], configured: float, q: float, min_samples: int, window: int, cap: float, shorter: bool
) -> None:
    cfg = learning(quantile=q, minSamples=min_samples, window=window, maxSeconds=cap, allowShorter=shorter)
    est = estimate_startup(samples, configured, cfg)
    valid = [x for x in samples if math.isfinite(x) and 0 <= x <= cap]
    assert est.dropped == len(samples) - len(valid)
    assert est.used == min(window, len(valid))
    recent = valid[-window:]
    if len(recent) < min_samples:
        event("too few samples: the configured delay")
        assert not est.learned and math.isnan(est.observed_seconds)
    else:
        # One of the recent samples, rounded up to a whole second (within maxSeconds), is learned
        # unless it is shorter than the configured delay and allowShorter is off.
        assert est.observed_seconds in recent
        learned_value = min(cap, float(math.ceil(est.observed_seconds - 1e-9)))
        allowed = shorter or learned_value >= configured
        if not allowed:
            event("shorter and allowShorter off: the configured delay")
        else:
            event(f"learned, allowShorter {'on' if shorter else 'off'}")
        assert est.learned == allowed
        if allowed:
            assert est.seconds == learned_value
    if est.learned:
        assert 0 <= est.seconds <= cap
        assert est.used >= min_samples
        assert est.seconds + 1e-6 >= min(recent)
        assert est.seconds <= math.ceil(max(recent))
        if not shorter:
            assert est.seconds >= configured
    else:
        assert est.seconds == configured
    assert est.sentence.startswith(f"start-up {est.seconds:.0f} s")


@settings(max_examples=100, deadline=None)
@given(base=st.lists(st.floats(min_value=0, max_value=800), min_size=5, max_size=50), extra=st.floats(0, 100))
def test_slower_readiness_times_never_give_a_shorter_delay(base: list[float], extra: float) -> None:
    slower = [x + extra for x in base]
    assert estimate_startup(slower, 0.0).seconds >= estimate_startup(base, 0.0).seconds
