"""Reading one sample of the daemon's own Prometheus registry."""

from __future__ import annotations

from scaleahead.daemon import Daemon


def metric_value(daemon: Daemon, name: str, **labels: str) -> float:
    value = daemon.metrics.registry.get_sample_value(name, labels or None)
    assert value is not None, f"no sample {name}{labels}"
    return float(value)
