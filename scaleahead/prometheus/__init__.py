"""Prometheus as the source of demand history: the one adapter that talks HTTP to Prometheus.

- ``client``: range queries over HTTP (chunking, retries, auth, TLS); the ONLY module that imports
  an HTTP library (import-linter checks it).
- ``history``: ``PrometheusHistory``, the control loop's ``HistorySource`` with incremental reads
  and an on-disk cache that survives restarts.
- ``backfill``: traces -> OpenMetrics -> a TSDB (``promtool``), and a local server over it.

Works with anything that speaks the Prometheus HTTP API (Thanos, Mimir, VictoriaMetrics).
"""

from __future__ import annotations

from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, PrometheusError, RangeRequest
from scaleahead.prometheus.history import PrometheusHistory

__all__ = ["PrometheusClient", "PrometheusConfig", "PrometheusError", "PrometheusHistory", "RangeRequest"]
