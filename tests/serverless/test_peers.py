"""The serverless peers on small traces whose warm minutes are worked out by hand."""

from __future__ import annotations

import numpy as np

from scaleahead.bench.serverless_peers import FixedKeepAlive, HybridHistogram, Oracle


def play(peer: FixedKeepAlive | HybridHistogram, counts: np.ndarray) -> np.ndarray:
    warm = np.zeros(counts.shape, dtype=bool)
    for t in range(counts.shape[1]):
        warm[:, t] = peer.decide()
        peer.observe(counts[:, t])
    return warm


def test_fixed_keepalive_keeps_warm_exactly_n_minutes_after_the_last_invocation() -> None:
    counts = np.zeros((1, 30), dtype=np.int64)
    counts[0, [0, 15, 16]] = 1
    warm = play(FixedKeepAlive(1, 10), counts)
    expected = np.zeros(30, dtype=bool)
    expected[1:11] = True  # after minute 0
    expected[16:27] = True  # after minute 15 (and renewed by minute 16: 17..26)
    assert warm[0].tolist() == expected.tolist()
    # minute 15 is a cold start, minute 16 is warm
    assert not warm[0, 15] and warm[0, 16]


def test_fixed_keepalive_never_warms_a_function_never_invoked() -> None:
    warm = play(FixedKeepAlive(2, 20), np.zeros((2, 25), dtype=np.int64))
    assert not warm.any()


def test_hybrid_histogram_uses_the_4h_keepalive_until_it_has_seen_an_idle_time() -> None:
    counts = np.zeros((1, 300), dtype=np.int64)
    counts[0, 0] = 1
    warm = play(HybridHistogram(["app"]), counts)
    assert not warm[0, 0]
    assert warm[0, 1:241].all()  # standard keep-alive: the whole 240-minute range
    assert not warm[0, 241:].any()


def test_hybrid_histogram_prewarms_a_periodic_app_just_around_its_period() -> None:
    # Invoked every 10 minutes: every idle time is 10, head = tail = 10, so the pre-warm window is
    # floor(10 * 0.9) = 9 and the keep-alive ends at ceil(10 * 1.1) = 11 minutes after a call.
    counts = np.zeros((1, 61), dtype=np.int64)
    counts[0, ::10] = 1
    peer = HybridHistogram(["app"])
    warm = play(peer, counts)
    assert peer.windows(0) == (9, 11)
    for start in (20, 30, 40, 50):  # once an idle time is in the histogram
        # warm at idle 9 and 10 after the previous call; the call at `start` restarts the windows,
        # so start+1 .. start+8 (idle 1..8) are unloaded
        assert warm[0, start - 1 : start + 1].all(), start
        assert not warm[0, start + 1 : start + 9].any(), start
    # Before the first idle time was seen (minutes 1..10) the 4 h keep-alive held the instance.
    assert warm[0, 1:11].all()


def test_hybrid_histogram_falls_back_to_the_4h_keepalive_when_the_histogram_is_flat() -> None:
    peer = HybridHistogram(["a"])
    counts = np.zeros((1, 2000), dtype=np.int64)
    # idle times 1, 2, ..., 60 once each: a flat histogram, CV of the 240 bin counts = 1.73 < 2
    t = 0
    for gap in range(1, 61):
        t += gap
        counts[0, t] = 1
    play(peer, counts[:, : t + 1])
    assert peer.windows(0) == (0, 240)


def test_hybrid_histogram_warms_every_function_of_an_app_together() -> None:
    counts = np.zeros((2, 5), dtype=np.int64)
    counts[0, 0] = 1
    warm = play(HybridHistogram(["app", "app"]), counts)
    assert warm[:, 1:].all()


def test_oracle_warms_exactly_the_minutes_with_invocations() -> None:
    assert Oracle().decide_with(np.array([0, 3, 1, 0])).tolist() == [False, True, True, False]
