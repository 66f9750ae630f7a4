"""``PrometheusHistory``: the control loop's history source, reading only what is new each cycle.

The first read of a workload loads its window (``window_s``, default 2 days) of the policy's
``demand.query`` at the policy's ``demand.stepSeconds``. Each later cycle asks Prometheus only for
the points after the newest one it holds, plus ``overlap_steps`` points before it (the newest
points may still be changing while scrapes and rule evaluations catch up), and back to the oldest
of the newest points that are still missing, within ``missing_lookback_s`` (Prometheus lagging:
a point missing when first read is read again until it comes). When the cache holds points later
than ``now`` (the daemon's clock was corrected backwards after running ahead), it is cut back to
the points known by ``now`` and the missing ones before are read again. With ``cache_dir`` the
history is kept on disk, so a restarted loop reads only what happened while it was down.

Only points at or before ``now`` are returned (a point is known at its timestamp), each as the
``Series`` step that ends at it (``as_steps``: the point at ``T`` is the step ``[T - step, T)``), so
no step is returned before it has ended (no peeking). Returned series are read-only views
of the cache, never changed afterwards: a cycle only appends, and when a re-read point changed,
the cache copies its buffer first (copy on write). A workload whose read fails is left
out of the result, its error kept in ``errors`` (naming workload, query and what to check) and
logged; the others go on, and the loop's planner falls back for the missing one.

Cache layout (``cache_dir``): per (server URL, query, step), ``<key>.json`` with the step and
format, and ``<key>.f64``: the grid start, then the values, as raw little-endian float64 (NaN =
missing). A cycle writes only the changed tail of the data file; when it reaches 1.25 windows,
the prefix that fell out of the window is dropped (the file is rewritten once, under a temporary
name and renamed: start and values change together, so a crash never pairs values with another
start). A cache that cannot be written (a full disk) is logged and dropped for that query; the
history read from Prometheus is still returned.

What is held is bounded by the queries in use: ``retain(policies)``, given the full set of policies
in force, drops the window (in memory and on disk) of every query none of them uses any more, and
``prune_cache()`` deletes the cache files no process wrote for longer than the window (those of
workloads removed while no process held them). Until 2026-12-05 neither existed: every removed
workload's window stayed in memory and on disk for ever.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from scaleahead.errors import UserError
from scaleahead.policy import Policy, history_points_refusal
from scaleahead.prometheus.client import PrometheusClient, PrometheusConfig, PrometheusError, RangeRequest
from scaleahead.settings import PrometheusSettings
from scaleahead.types import FloatArray, Series, WorkloadRef

log = logging.getLogger("scaleahead.prometheus")

DAY_S = 86400.0
#: How far back (s) the newest missing points are read again each cycle (``missing_lookback_s``).
#: 10 minutes: a lag longer than that leaves the planner stale (``fallback.staleAfterSeconds``,
#: 60 s by default) for 10 times its limit, so it is an outage rather than a delay; and at 10 s
#: steps the 60 points still fit a batched short read (``PrometheusConfig.batch_points``, 360).
MISSING_LOOKBACK_S = 600.0
#: The cache's format: 2 keeps the grid start as the data file's first number (1 kept it in the JSON file).
CACHE_FORMAT = 2
#: A cache key: the first 24 hex digits of a SHA-256 (``PrometheusHistory._key``).
_KEY = re.compile(r"[0-9a-f]{24}")
#: The suffixes of a key's cache files: data, metadata and their temporary names while written.
_CACHE_SUFFIXES = (".json", ".f64", ".tmp", ".jsontmp")


@dataclass
class _Entry:
    """Cached values of one (query, step): ``values[i]`` is at ``start + i * step_s``.

    ``buf`` has room to grow, so a cycle appends in place instead of copying the window.
    """

    start: float
    step_s: float
    buf: FloatArray
    n: int

    @property
    def values(self) -> FloatArray:
        return self.buf[: self.n]

    @property
    def end(self) -> float:
        """Time just after the newest point held."""
        return self.start + self.n * self.step_s


def _mtime(path: Path) -> float:
    """When the file was last written; -inf when it is gone (deleted meanwhile)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return -math.inf


def _capacity(window_n: int) -> int:
    """Room for the window plus a quarter: compaction (one copy of the window) every window/4 cycles."""
    return window_n + max(64, window_n // 4)


def last_point_before(now: float, step_s: float) -> float:
    """The newest grid point strictly before ``now``."""
    return (math.ceil(now / step_s - 1e-9) - 1) * step_s


def last_point_known(now: float, step_s: float) -> float:
    """The newest grid point at or before ``now``: a Prometheus point is known at its timestamp."""
    return math.floor(now / step_s + 1e-9) * step_s


def as_steps(series: Series) -> Series:
    """Prometheus points as the steps of a ``Series``: the point at ``T`` is known at ``T``, so it
    is the step ``[T - step, T)`` (a ``Series`` step, like a trace's bucket, is known when it ends).
    Read this way, the newest point is the one that ends at the read's time, the planner counts its
    age from ``T`` (not ``T + step``) and a forecast made at ``now`` takes it as input."""
    return Series(series.name, series.start - series.step_s, series.step_s, series.values, series.unit)


class PrometheusHistory:
    """A ``scaleahead.loop.HistorySource`` over Prometheus with incremental reads.

    Args:
        client: the HTTP client (its config holds URL, auth and parallelism).
        window_s: how much history each read returns (s); 2 days covers daily seasonality.
        cache_dir: where history survives restarts; ``None`` keeps it in memory only.
        overlap_steps: points before the newest held one that are read again each cycle.
        missing_lookback_s: how far back before ``now`` the newest points that are still missing
            are read again each cycle (s): a Prometheus lagging by less than this leaves no hole.
        max_points: the most points one policy's window may hold (``loop.max_history_points``);
            None: twice the window's points at the default 10 s step
            (``scaleahead.policy.history_points_limit``). A policy over it is never read: its
            workload gets an error in ``errors`` saying what to change.
    """

    def __init__(
        self,
        client: PrometheusClient,
        window_s: float = 2 * DAY_S,
        cache_dir: str | Path | None = None,
        overlap_steps: int = 3,
        missing_lookback_s: float = MISSING_LOOKBACK_S,
        max_points: int | None = None,
    ) -> None:
        self.client = client
        self.window_s = window_s
        self.max_points = max_points
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.overlap_steps = max(0, overlap_steps)
        self.missing_lookback_s = max(0.0, missing_lookback_s)
        self.errors: dict[WorkloadRef, str] = {}
        #: The workloads of ``errors`` whose query answered with no data at all (``PrometheusError.empty``).
        self.empty: set[WorkloadRef] = set()
        self._entries: dict[str, _Entry] = {}
        self._keys: dict[tuple[str, float], str] = {}
        #: Per key being read this cycle: where the plain overlap would have started (set only
        #: when missing points before it are read again), to tell a lagging Prometheus.
        self._overlap_from: dict[str, float] = {}
        #: Keys whose lag was logged (once per process).
        self._lag_said: set[str] = set()
        #: Keys whose cache was cut back after this clock went back: their whole window is read
        #: again until a read of it succeeds (a failed one would otherwise leave the hole for good).
        self._reread: set[str] = set()
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)

    # -- the HistorySource protocol -------------------------------------------------------------

    def read(self, policies: Sequence[Policy], now: float) -> Mapping[WorkloadRef, Series]:
        """The steps known by ``now`` (``as_steps``) for every policy whose read succeeds."""
        self.errors = {}
        self.empty = set()
        plans: dict[str, RangeRequest] = {}
        wanted: list[tuple[Policy, str]] = []
        for policy in policies:
            demand = policy.spec.demand
            refused = history_points_refusal(policy, self.window_s, self.max_points)
            if refused is not None:
                # Not even one request: the window at a tiny step was millions of points (a second
                # guard behind the schema's 1 s floor, and what refuses a cluster object: run's check).
                ref = policy.workload
                self.errors[ref] = f"{ref}: not read: {refused}."
                log.warning("history for %s", self.errors[ref], extra={"event": "history_too_many_points"})
                continue
            key = self._key(demand.query, demand.step_seconds)
            wanted.append((policy, key))
            if key in plans:
                continue
            req = self._plan(key, str(policy.workload), demand.query, demand.step_seconds, now)
            if req is not None:
                plans[key] = req
        keys = list(plans)
        labels = {k: plans[k].label for k in keys}
        results = self.client.fetch_many([plans[k] for k in keys])
        failed: dict[str, PrometheusError] = {}
        for key, res in zip(keys, results, strict=True):
            if isinstance(res, PrometheusError):
                failed[key] = res
                continue
            self._merge(key, res, labels[key])
            self._reread.discard(key)
        self._overlap_from.clear()
        out: dict[WorkloadRef, Series] = {}
        for policy, key in wanted:
            ref = policy.workload
            if key in failed:
                err = failed[key]
                msg = err.message if str(ref) in err.what else f"{ref}: {err.message}"
                self.errors[ref] = msg
                if err.empty:
                    self.empty.add(ref)
                log.warning(
                    "history for %s: %s",
                    ref,
                    msg,
                    extra={
                        "event": "history_failed",
                        "workload": ref.key,
                        "reason": "empty" if err.empty else err.kind,
                    },
                )
                continue
            entry = self._entries.get(key)
            if entry is None:
                continue
            step = policy.spec.demand.step_seconds
            t_last = last_point_known(now, step)
            i0 = max(0, int(round((t_last + step - self.window_s - entry.start) / step)))
            i1 = max(i0, min(entry.n, int(round((t_last - entry.start) / step)) + 1))
            view = entry.buf[i0:i1]  # no copy: the buffer is only appended to, or copied on write
            view.flags.writeable = False
            # The window is the steps known by now: the point at T is the step [T - step, T).
            out[ref] = as_steps(Series(ref.key, entry.start + i0 * step, step, view, policy.spec.demand.unit))
        return out

    def release(self) -> None:
        """Drop the in-memory copies of the history (series returned earlier stay valid: each holds
        its buffer). The next read loads it from the disk cache, if there is one, and reads only
        what is new; without one, it reads the window again."""
        self._entries.clear()

    def retain(self, policies: Sequence[Policy]) -> int:
        """Keep only the history of the queries that ``policies`` use: drop the window, in memory
        and in the cache folder, of every (query, step) read before that none of them uses any more
        (its workload removed, or its query or step changed). A query two policies share stays
        while either uses it.

        ``policies`` must be the **full** set in force, not one read's: a workload backing off is
        left out of reads but keeps its history. Returns how many (query, step) were dropped. A
        file that cannot be deleted is logged (``history_cache_not_deleted``); ``prune_cache``
        deletes it once it is a window old."""
        wanted = {(p.spec.demand.query, p.spec.demand.step_seconds) for p in policies}
        forget = getattr(self.client, "forget_queries", None)
        if callable(forget):  # the client's memory of queries read alone (slow or refused ones)
            forget({q for q, _ in wanted})
        gone = [qs for qs in self._keys if qs not in wanted]
        for qs in gone:
            key = self._keys.pop(qs)
            self._entries.pop(key, None)
            self._overlap_from.pop(key, None)
            self._lag_said.discard(key)
            self._reread.discard(key)
            if self.cache_dir is not None:
                self._delete_files([self.cache_dir / f"{key}{suffix}" for suffix in _CACHE_SUFFIXES])
        if gone:
            log.info(
                "history of %d quer%s no policy uses any more dropped",
                len(gone),
                "y" if len(gone) == 1 else "ies",
                extra={"event": "history_dropped", "queries": len(gone)},
            )
        return len(gone)

    def prune_cache(self, now: float | None = None) -> int:
        """Delete the cache files of the queries not read since this process started whose files
        were last written more than the window before ``now`` (wall-clock seconds, the files'
        times; default: the time now): their history is too old to extend, so a read would load the
        window afresh anyway. These are the files of workloads removed while no process held them
        (``retain`` deletes those this process read). Files whose names are not cache keys are
        left alone. Returns how many files were deleted."""
        if self.cache_dir is None:
            return 0
        cutoff = (time.time() if now is None else now) - self.window_s
        held = set(self._keys.copy().values()) | set(self._entries.copy())  # copies: the loop may read meanwhile
        files: dict[str, list[Path]] = {}
        try:
            for path in self.cache_dir.iterdir():
                key, dot, suffix = path.name.partition(".")
                if _KEY.fullmatch(key) and f"{dot}{suffix}" in _CACHE_SUFFIXES and key not in held:
                    files.setdefault(key, []).append(path)
        except OSError as exc:
            log.warning(
                "cannot list the history cache %s (%s): its old files stay until the next prune",
                self.cache_dir,
                exc.strerror or exc,
                extra={"event": "history_cache_not_deleted", "path": str(self.cache_dir)},
            )
            return 0
        stale = [paths for paths in files.values() if max(_mtime(p) for p in paths) < cutoff]
        return sum(self._delete_files(paths) for paths in stale)

    def _delete_files(self, paths: Sequence[Path]) -> int:
        """Delete the files (those missing are fine); log each that cannot be; the count deleted."""
        deleted = 0
        for path in paths:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning(
                    "cannot delete the history cache file %s (%s); the next prune tries again",
                    path,
                    exc.strerror or exc,
                    extra={"event": "history_cache_not_deleted", "path": str(path)},
                )
                continue
            deleted += 1
        return deleted

    # -- planning what to fetch -----------------------------------------------------------------

    def _key(self, query: str, step_s: float) -> str:
        key = self._keys.get((query, step_s))
        if key is None:
            text = f"{self.client.base}\n{query}\n{step_s!r}"
            # Who reads: on one URL another basic-auth user or tenant header (Mimir, Grafana Cloud:
            # the user is the tenant) is another history; until 2026-12-07 it got the old one's cache
            # (a review). Not the password or a bearer token: rotating one keeps the cache.
            cfg = self.client.config
            who = [f"user={cfg.username}"] if cfg.username else []
            who += [f"{k.lower()}={v}" for k, v in sorted(cfg.headers.items()) if k.lower() != "authorization"]
            if who:
                text += "\n" + "\n".join(who)
            key = self._keys[(query, step_s)] = hashlib.sha256(text.encode()).hexdigest()[:24]
        return key

    def _plan(self, key: str, label: str, query: str, step_s: float, now: float) -> RangeRequest | None:
        t_last = last_point_known(now, step_s)
        w_start = t_last + step_s - self.window_s
        entry = self._entries.get(key) or self._load(key, step_s)
        if entry is not None and (entry.end < w_start or entry.start > w_start + 1e-6):
            entry = None  # too old to extend, or does not reach back far enough: read the window afresh
            self._entries.pop(key, None)
        if entry is None:
            return RangeRequest(label, query, w_start, t_last, step_s)
        known_n = int(round((t_last - entry.start) / step_s)) + 1  # the points at or before t_last
        went_back = entry.n > known_n
        if went_back:
            # The cache holds points later than now: the clock was corrected backwards after running
            # ahead. Those points were read before Prometheus had them (missing) and would never be
            # read again: cut the cache back to the points known by now (copied first: series
            # returned earlier keep their values) and read the missing ones before again.
            log.warning(
                "history for %s: the cache holds points up to %.0f s after now (this clock went back); "
                "reading them again as they come",
                label,
                entry.end - (t_last + step_s),
                extra={"event": "history_clock_back", "workload": label, "seconds": entry.end - (t_last + step_s)},
            )
            buf = entry.buf.copy()
            buf[known_n:] = np.nan
            entry.buf, entry.n = buf, known_n
            self._reread.add(key)
        elif entry.end > t_last:
            return None  # nothing new since the last read
        overlap_from = max(entry.end - self.overlap_steps * step_s, entry.start, w_start)
        # Read again the newest points that are still missing (Prometheus lagging), as far back as
        # the look-back; after the clock went back, as far back as the window, until that succeeds.
        reread = key in self._reread
        lookback_s = self.window_s if reread else self.missing_lookback_s
        tail_n = min(entry.n, int(lookback_s // step_s))
        tail = entry.buf[entry.n - tail_n : entry.n]
        finite = np.flatnonzero(np.isfinite(tail))
        # (compared in points: 600 s is no whole number of 7 s or 45 s steps)
        if finite.size == 0 and not reread and tail_n >= max(1, int(lookback_s // step_s)):
            # Nothing in the whole look-back: a series that ended (an idle function, a removed
            # exporter) or a lag beyond it. Only the overlap is read again, as for a full series, so
            # an ended series costs 4 points a cycle, not the look-back's 61 for ever.
            since = overlap_from
        else:
            first_missing = entry.start + (entry.n - tail_n + (int(finite[-1]) + 1 if finite.size else 0)) * step_s
            since = max(min(overlap_from, first_missing), entry.start, w_start)
        if since < overlap_from - 1e-6 and not reread:  # after this clock went back, no lag to tell
            self._overlap_from[key] = overlap_from
        return RangeRequest(label, query, since, t_last, step_s, allow_empty=True)

    # -- merging and the on-disk cache ----------------------------------------------------------

    def _merge(self, key: str, new: Series, label: str = "") -> None:
        entry = self._entries.get(key)
        window_n = max(1, int(round(self.window_s / new.step_s)))
        if entry is None:
            buf = np.full(max(_capacity(window_n), len(new)), np.nan)
            buf[: len(new)] = new.values
            entry = _Entry(new.start, new.step_s, buf, len(new))
            self._entries[key] = entry
            self._save(key, entry, 0, full=True)
            return
        if len(new) == 0:
            return
        step = entry.step_s
        off = int(round((new.start - entry.start) / step))
        need = off + len(new)
        full = False
        if need > len(entry.buf):  # out of room: keep the newest window, move it to the front
            drop = max(0, min(entry.n - window_n, off))
            keep = entry.buf[drop : entry.n]
            buf = np.full(max(_capacity(window_n), need - drop), np.nan)
            buf[: len(keep)] = keep
            entry.buf, entry.n, entry.start = buf, len(keep), entry.start + drop * step
            off -= drop
            need -= drop
            full = True
        held = min(entry.n, need) - off  # points re-read (the overlap) that earlier reads returned
        if held > 0 and key in self._overlap_from and key not in self._lag_said:
            self._say_lag(key, label, entry, off, held, new)
        if held > 0 and not full:
            old, fresh = entry.buf[off : off + held], new.values[:held]
            if not np.array_equal(old, fresh, equal_nan=True):
                entry.buf = entry.buf.copy()  # copy on write: series returned earlier keep their values
        entry.buf[off:need] = new.values
        entry.n = max(entry.n, need)
        self._save(key, entry, off, full=full)

    def _say_lag(self, key: str, label: str, entry: _Entry, off: int, held: int, new: Series) -> None:
        """Log once per key when a point older than the overlap, missing before, has come now."""
        step = entry.step_s
        n_before = max(0, min(held, int(round((self._overlap_from[key] - new.start) / step))))
        came = np.isnan(entry.buf[off : off + n_before]) & np.isfinite(new.values[:n_before])
        if not came.any():
            return
        self._lag_said.add(key)
        t = new.start + int(np.flatnonzero(came)[0]) * step
        late = entry.end - step - t  # the point came at least this late: it was missing when read then
        log.warning(
            "history for %s: Prometheus answered the point at %s at least %.0f s after its time: it lags "
            "behind this clock by more than the %d-step overlap (an ingestion delay, remote write, a slow "
            "scrape, or its clock behind this one); the newest missing points are read again for up to "
            "%.0f s",
            label,
            datetime.fromtimestamp(t, UTC).isoformat(),
            late,
            self.overlap_steps,
            self.missing_lookback_s,
            extra={"event": "prometheus_lag", "workload": label, "lag_s": late},
        )

    def _paths(self, key: str) -> tuple[Path, Path]:
        assert self.cache_dir is not None
        return self.cache_dir / f"{key}.json", self.cache_dir / f"{key}.f64"

    def _save(self, key: str, entry: _Entry, from_index: int, full: bool) -> None:
        if self.cache_dir is None:
            return
        meta_path, data_path = self._paths(key)
        data = entry.values.astype("<f8", copy=False)
        try:
            if not full and data_path.exists():
                with data_path.open("r+b") as f:
                    f.seek((1 + from_index) * 8)
                    f.write(data[from_index:].tobytes())
                    f.truncate()  # the cache may have been cut back (the clock went back)
                return
            meta = {"step_s": entry.step_s, "format": CACHE_FORMAT}
            if not meta_path.exists() or _read_meta(meta_path) != meta:
                meta_tmp = meta_path.with_suffix(".jsontmp")
                meta_tmp.write_text(json.dumps(meta))
                meta_tmp.replace(meta_path)
            tmp = data_path.with_suffix(".tmp")
            tmp.write_bytes(np.array([entry.start], dtype="<f8").tobytes() + data.tobytes())
            tmp.replace(data_path)  # start and values in one rename
        except (OSError, ValueError) as exc:
            log.warning(
                "cannot write the history cache %s (%s): this query's history is kept in memory only until "
                "a write succeeds; free space in or fix the cache folder",
                data_path,
                exc,
            )
            for path in (data_path, data_path.with_suffix(".tmp")):
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)  # never leave a half-written file to be loaded

    def _load(self, key: str, step_s: float) -> _Entry | None:
        if self.cache_dir is None:
            return None
        meta_path, data_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            raw = np.fromfile(data_path, dtype="<f8").astype(np.float64)
        except (OSError, ValueError):
            return None
        if meta.get("format") != CACHE_FORMAT or float(meta.get("step_s", -1)) != step_s or len(raw) < 1:
            return None  # another format (1 kept the start in the JSON file), step or an empty file: read afresh
        start, values = float(raw[0]), raw[1:]
        if not math.isfinite(start):
            return None
        window_n = max(1, int(round(self.window_s / step_s)))
        buf = np.full(max(_capacity(window_n), len(values)), np.nan)
        buf[: len(values)] = values
        entry = _Entry(start, step_s, buf, len(values))
        self._entries[key] = entry
        return entry


def history_from_settings(
    settings: PrometheusSettings, cache_dir: str | Path | None = None, **config: Any
) -> PrometheusHistory:
    """A ``PrometheusHistory`` from the process settings (``SCALEAHEAD_PROMETHEUS__URL`` etc.).

    Extra keyword arguments go to ``PrometheusConfig`` (credentials, TLS files).
    """
    if not settings.url:
        raise UserError(
            "No Prometheus URL is configured.",
            "Set SCALEAHEAD_PROMETHEUS__URL (plan also takes --prometheus URL), or use --history trace:NAME.",
        )
    creds = credentials(
        settings.bearer_token_file,
        settings.username,
        settings.password_file,
        settings.ca_file,
        settings.cert_file,
        settings.key_file,
    )
    cfg = PrometheusConfig(
        settings.url,
        timeout_s=settings.timeout_s,
        max_concurrency=settings.max_concurrency,
        accept_partial=settings.accept_partial,
        **{**creds, **config},
    )
    return PrometheusHistory(PrometheusClient(cfg), cache_dir=cache_dir)


def credentials(
    bearer_token_file: str | None = None,
    username: str | None = None,
    password_file: str | None = None,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> dict[str, Any]:
    """``PrometheusConfig`` keyword arguments for the given credential files (secrets stay in files).

    The password is read now; the token file is re-read by the client on every request. A password
    file that cannot be read or a TLS file that does not exist is a ``UserError`` naming it.
    """
    password = None
    if password_file:
        try:
            password = Path(password_file).read_text(encoding="utf-8").rstrip("\n")
        except OSError as exc:
            raise UserError(f"Cannot read the Prometheus password file {password_file}: {exc.strerror}.") from exc
    for name, path in (("CA", ca_file), ("client certificate", cert_file), ("client key", key_file)):
        if path and not Path(path).is_file():
            raise UserError(f"The Prometheus {name} file {path} does not exist.", "Check the path.")
    out: dict[str, Any] = {
        "bearer_token_file": bearer_token_file,
        "username": username,
        "password": password,
        "ca_file": ca_file,
        "cert_file": cert_file,
        "key_file": key_file,
    }
    return {k: v for k, v in out.items() if v is not None}


def read_range(
    client: PrometheusClient, policies: Sequence[Policy], start: float, end: float
) -> tuple[dict[WorkloadRef, Series], dict[WorkloadRef, str]]:
    """Each policy's demand from the Prometheus points in ``[start, end)`` (e.g. for training), read
    in parallel and chunked, as ``Series`` steps (``as_steps``: each point is the step that ends
    at it, so the series starts one step before ``start``).

    Returns:
        the series of the workloads that could be read, and an error message per workload that
        could not (naming the workload, the query and what to check).
    """
    reqs: dict[tuple[str, float], RangeRequest] = {}
    for p in policies:
        d = p.spec.demand
        if (d.query, d.step_seconds) not in reqs:
            last = last_point_before(end, d.step_seconds)
            reqs[(d.query, d.step_seconds)] = RangeRequest(str(p.workload), d.query, start, last, d.step_seconds)
    keys = list(reqs)
    got = dict(zip(keys, client.fetch_many([reqs[k] for k in keys]), strict=True))
    series: dict[WorkloadRef, Series] = {}
    errors: dict[WorkloadRef, str] = {}
    for p in policies:
        d = p.spec.demand
        res = got[(d.query, d.step_seconds)]
        if isinstance(res, PrometheusError):
            errors[p.workload] = res.message if str(p.workload) in res.message else f"{p.workload}: {res.message}"
        else:
            series[p.workload] = as_steps(Series(p.workload.key, res.start, res.step_s, res.values, d.unit))
    return series, errors


def _read_meta(path: Path) -> object:
    """A cache entry's metadata, or None when it is not JSON (damaged, emptied): then it is written
    afresh. Until 2026-12-07 the error was taken for a failed write, the entry was never repaired,
    and every cycle warned and every restart read the whole window again (a review)."""
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None
