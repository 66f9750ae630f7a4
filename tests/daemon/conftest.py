"""Fixtures of the daemon tests: a real trace slice, policies, a SQLite store, a virtual clock."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from forecaster import make_model
from scaleahead.clock import VirtualClock
from scaleahead.daemon import Daemon
from scaleahead.loop import Deps
from scaleahead.policy import Policy, parse_policies
from scaleahead.settings import Settings
from scaleahead.traces import load_series
from scaleahead.tracesource import InMemoryTarget, TraceHistory
from scaleahead.types import Series
from storage import Store

os.environ.setdefault("OMP_NUM_THREADS", "1")

DAY = 86400.0


@pytest.fixture(scope="session")
def nasa() -> Series:
    """Four days of the real NASA 1995 trace (10 s)."""
    s = load_series("nasa-10s")
    return s.between(s.start, s.start + 4 * DAY)


def make_policies(n: int = 2, groups: Sequence[str] = ()) -> list[Policy]:
    """``n`` policies; with ``groups``, policy ``i`` is in rollout group ``groups[i % len(groups)]``."""
    docs = []
    for i in range(n):
        group = f"\n  rolloutGroup: {groups[i % len(groups)]}" if groups else ""
        docs.append(
            f"""
apiVersion: scaleahead.io/v1alpha1
kind: PredictiveScalingPolicy
metadata: {{name: web{i}, namespace: shop}}
spec:
  target: {{name: web{i}}}
  demand: {{query: 'sum(rate(http_requests_total{{deployment="web{i}"}}[1m]))', unit: req/10s}}
  capacityPerReplica: 2
  maxReplicas: 60
  maxStepUp: 20{group}
"""
        )
    return parse_policies("---".join(docs))


DaemonFactory = Callable[..., tuple[Daemon, VirtualClock, InMemoryTarget, Store]]


@pytest.fixture
def daemon_factory(nasa: Series, tmp_path: Path) -> DaemonFactory:
    """Builds a daemon on a virtual clock at day 3 of the trace, SQLite, an in-memory cluster."""

    def build(
        n: int = 2,
        settings: Settings | None = None,
        db_url: str | None = None,
        groups: Sequence[str] = (),
        **kwargs: object,
    ) -> tuple[Daemon, VirtualClock, InMemoryTarget, Store]:
        t0 = nasa.start + 3 * DAY
        policies = make_policies(n, groups)
        history = TraceHistory(default=nasa, window_s=1.2 * DAY, scale_spread=0.5)
        training = TraceHistory(default=nasa, window_s=3 * DAY, scale_spread=0.5)
        forecaster = make_model("seasonal_naive").fit([nasa.between(nasa.start, t0)])
        settings = settings or Settings()
        # The retraining tests exercise the mechanism: a baseline family trains in milliseconds.
        settings.forecast.model = "seasonal_naive"
        store = Store(db_url or f"sqlite:///{tmp_path / 'daemon.db'}")
        target = InMemoryTarget()
        clock = VirtualClock(t0)
        deps = Deps(history, forecaster, target, store, policies)
        daemon = Daemon(
            deps,
            settings or Settings(),
            clock,
            training_history=training,
            **kwargs,  # type: ignore[arg-type]
        )
        return daemon, clock, target, store

    return build
