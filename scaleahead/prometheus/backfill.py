"""Traces into Prometheus: OpenMetrics text, ``promtool tsdb create-blocks-from``, a local server.

So that anyone can try scaleahead on real history in minutes (``scaleahead backfill --serve``),
and so that the tests and ``scaleahead bench fetch`` read from a real Prometheus.

Missing points of a trace (NaN) are not written: they stay gaps. The local server runs with
``--query.lookback-delta`` of half the step, so a gap reads back as missing; with Prometheus'
default of 5 minutes, a query would repeat the last value before a gap for 5 minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

import numpy as np

from scaleahead.errors import UserError
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig
from scaleahead.types import Series

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def parse_labels(text: str | None) -> dict[str, str]:
    """``k=v,k2=v2`` -> a dict, checking Prometheus label-name syntax."""
    labels: dict[str, str] = {}
    if not text:
        return labels
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise UserError(f"--labels part {part!r} is not k=v.", "Write labels as k=v,k2=v2.")
        key, value = (s.strip() for s in part.split("=", 1))
        if not _LABEL.match(key) or key.startswith("__"):
            raise UserError(f"Label name {key!r} is not valid in Prometheus.", "Use [a-zA-Z_][a-zA-Z0-9_]*.")
        labels[key] = value.strip('"')
    return labels


def check_metric_name(name: str) -> str:
    if not _NAME.match(name):
        raise UserError(f"Metric name {name!r} is not valid in Prometheus.", "Use [a-zA-Z_:][a-zA-Z0-9_:]*.")
    return name


def _label_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in labels.items()
    )
    return "{" + inner + "}"


def write_openmetrics(
    out: IO[str], metric: str, series: Iterable[tuple[Mapping[str, str], Series]], eof: bool = True
) -> int:
    """Write one gauge family in OpenMetrics text; NaN points are left out.

    A series' step ``[t, t + step)`` is written at ``t + step``, when it is known: read back, the
    point at ``T`` is the step that ended at ``T`` (``history.as_steps``), as the control loop reads
    every Prometheus point, so a replay through Prometheus never sees a step before it ends.

    Several families go in one file by writing all but the last with ``eof=False``.

    Returns:
        the number of samples written.
    """
    check_metric_name(metric)
    out.write(f"# TYPE {metric} gauge\n")
    total = 0
    for labels, s in series:
        prefix = f"{metric}{_label_text(labels)} "
        keep = np.flatnonzero(np.isfinite(s.values))
        if keep.size == 0:
            continue
        # A step is known when it ends: its sample is stamped there (a point at T is the step [T - step, T)).
        times = s.start + (keep + 1) * s.step_s
        vals = s.values[keep]
        # repr() round-trips floats exactly; integral values print without a fraction.
        lines = [
            f"{prefix}{int(v) if v.is_integer() and abs(v) < 1e15 else repr(v)} {int(t) if t.is_integer() else t!r}\n"
            for v, t in zip(vals.tolist(), times.tolist(), strict=True)
        ]
        out.write("".join(lines))
        total += keep.size
    if eof:
        out.write("# EOF\n")
    return total


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        raise UserError(
            "promtool is not installed.",
            "Install Debian's prometheus package (make system-deps), which ships promtool.",
        )
    return path


def create_blocks(openmetrics: Path, tsdb: Path, max_block_duration: str = "") -> None:
    """``promtool tsdb create-blocks-from openmetrics FILE DIR``; raises ``UserError`` on failure."""
    tsdb.mkdir(parents=True, exist_ok=True)
    cmd = [promtool(), "tsdb", "create-blocks-from", "openmetrics"]
    if max_block_duration:
        cmd.append(f"--max-block-duration={max_block_duration}")
    cmd += [str(openmetrics), str(tsdb)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(
            f"promtool could not create blocks in {tsdb}: {(proc.stderr or proc.stdout).strip()[-500:]}",
            "Check that the folder is writable and does not already hold overlapping blocks.",
        )


def backfill(
    tsdb: Path, metric: str, series: Iterable[tuple[Mapping[str, str], Series]], max_block_duration: str = "24h"
) -> int:
    """Turn series into TSDB blocks in ``tsdb``; returns the number of samples written."""
    with tempfile.TemporaryDirectory(prefix="scaleahead-om-") as tmp:
        path = Path(tmp) / "backfill.om"
        with path.open("w", encoding="utf-8") as out:
            n = write_openmetrics(out, metric, series)
        if n == 0:
            raise UserError("The trace has no values to backfill.", "Choose another trace or range.")
        create_blocks(path, tsdb, max_block_duration)
    return n


def _duration(seconds: float) -> str:
    ms = max(1, int(round(seconds * 1000)))
    return f"{ms}ms"


class LocalPrometheus:
    """A Prometheus server on ``127.0.0.1:port`` over ``tsdb``, with no scrape jobs.

    It never scrapes, so its head stays empty and retention (10 years, counted from the newest
    block) keeps the backfilled history. ``lookback_s`` is ``--query.lookback-delta``.
    """

    def __init__(self, tsdb: Path, port: int, lookback_s: float = 5.0, log_path: Path | None = None) -> None:
        self.tsdb = Path(tsdb)
        self.port = port
        self.lookback_s = lookback_s
        self.log_path = log_path or self.tsdb / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> LocalPrometheus:
        exe = shutil.which("prometheus")
        if exe is None:
            raise UserError("prometheus is not installed.", "Install Debian's prometheus package (make system-deps).")
        self.tsdb.mkdir(parents=True, exist_ok=True)
        config = self.tsdb / "scaleahead-prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                exe,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.tsdb}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=3650d",
                f"--query.lookback-delta={_duration(self.lookback_s)}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2")},
        )
        client = PrometheusClient(PrometheusConfig(self.url, retries=0))
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise UserError(
                        f"Prometheus exited with code {self.proc.returncode} while starting.",
                        f"See its log {self.log_path} (port {self.port} in use? TSDB locked by another server?).",
                    )
                if client.ready():
                    return self
                time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise UserError(f"Prometheus did not become ready in {timeout_s:g} s.", f"See its log {self.log_path}.")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
