"""Bad input from a black-box audit of the CLI: one clear error (exit 2, no traceback), nothing written.

Each case drives the real entry point (``scaleahead.cli.main``) with real files, in the style of
tests/test_bad_input_gaps.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Cli


def assert_refused(result: tuple[int, str, str], *says: str) -> str:
    code, _, err = result
    assert code == 2, err
    assert "error: " in err and "Traceback" not in err
    for text in says:
        assert text in err, err
    return err


# -- report --forecasts: a damaged, missing or empty .npz -------------------------------------------


def _bench_files(tmp_path: Path, value: float = 1.0) -> tuple[Path, Path]:
    """A `bench forecast --json` file and its `--save-forecasts` .npz, of 4 origins x 3 steps."""
    n, h = 4, 3
    summary = {
        "trace": "t.csv",
        "resolution_s": 10.0,
        "horizon_steps": h,
        "origins": n,
        "models": {"naive": {"mae": 0.1, "wql": 0.01, "coverage_q90": 0.9, "coverage": {"0.5": 0.5}}},
    }
    js, npz = tmp_path / "b.json", tmp_path / "b.npz"
    js.write_text(json.dumps(summary))
    grid = np.full((n, h), value, dtype=np.float32)
    np.savez_compressed(
        npz,
        origins=np.arange(n),
        origin_times=1_700_000_000.0 + 10.0 * np.arange(n),
        actual=grid,
        **{f"naive|{q:g}": grid for q in (0.1, 0.5, 0.9)},  # type: ignore[arg-type]
    )
    return js, npz


def test_report_writes_a_report_of_good_saved_forecasts(cli: Cli, tmp_path: Path) -> None:
    js, npz = _bench_files(tmp_path)
    out = tmp_path / "r.html"
    code, _, err = cli("report", "--out", str(out), "--bench", str(js), "--forecasts", str(npz))
    assert code == 0, err
    assert out.stat().st_size > 0


def test_report_refuses_a_truncated_npz(cli: Cli, tmp_path: Path) -> None:
    js, npz = _bench_files(tmp_path)
    data = npz.read_bytes()
    npz.write_bytes(data[: len(data) // 2])  # a copy cut short: was zipfile.BadZipFile's traceback
    out = tmp_path / "r.html"
    assert_refused(
        cli("report", "--out", str(out), "--bench", str(js), "--forecasts", str(npz)),
        f"Cannot read saved forecasts {npz}",
        "truncated or damaged",
        "--save-forecasts",
    )
    assert not out.exists()


def test_report_names_a_missing_npz_in_full(cli: Cli, tmp_path: Path) -> None:
    js, _ = _bench_files(tmp_path)
    missing = tmp_path / "nope.npz"
    out = tmp_path / "r.html"
    err = assert_refused(
        cli("report", "--out", str(out), "--bench", str(js), "--forecasts", str(missing)),
        f"--forecasts {missing} does not exist.",  # the path was cut at its first dot
    )
    assert "Errno" not in err
    assert not out.exists()


def test_report_refuses_saved_forecasts_that_hold_no_number(cli: Cli, tmp_path: Path) -> None:
    js, npz = _bench_files(tmp_path, value=float("nan"))  # was a report of nothing, "wrote ... (56 KB)"
    out = tmp_path / "r.html"
    assert_refused(
        cli("report", "--out", str(out), "--bench", str(js), "--forecasts", str(npz)),
        "'naive' (median)",
        "no finite value",
        "no report was written",
    )
    assert not out.exists()


# -- bench numeric options: a count of 0, a negative or NaN number is refused before the work --------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["bench", "storage", "--workloads", "0"], "--workloads 0 is not a count of 1 or more"),  # ZeroDivisionError
        (["bench", "storage", "--workloads", "-3"], "--workloads -3 is not a count of 1 or more"),  # "-0.00 MB"
        (["bench", "storage", "--interval-s", "-1"], "--interval-s -1 is not a finite number above 0"),
        (["bench", "storage", "--interval-s", "nan"], "--interval-s nan is not a finite number above 0"),
        (["bench", "forecast-speed", "--series", "0"], "--series 0 is not a count of 1 or more"),
        (["bench", "forecast-speed", "--repeats", "0"], "--repeats 0 is not a count of 1 or more"),
        (["bench", "forecast-speed", "--threads", "0"], "--threads 0 is not a count of 1 or more"),
        (["bench", "rollout", "--json", "{out}", "--split", "nan"], "--split nan is not a share strictly between"),
        (
            ["bench", "replay", "--trace", "nasa-10s", "--json", "{out}", "--plot", "{png}", "--plot-hours", "nan"],
            "--plot-hours nan is not a finite number above 0",  # was a ValueError traceback after the replay
        ),
        (
            ["bench", "serverless", "--trace", "azure-functions-1m", "--json", "{out}", "--cold-start-cost", "nan"],
            "--cold-start-cost nan is not a finite number of 0 or more",  # was an invalid PolicySpec mid-run
        ),
        (
            ["bench", "serverless", "--trace", "azure-functions-1m", "--json", "{out}", "--history-minutes", "0"],
            "--history-minutes 0 is not a count of 1 or more",
        ),
        (
            ["bench", "serverless", "--trace", "azure-functions-1m", "--json", "{out}", "--sweep-cost", "nan"],
            "--sweep-cost 'nan' has a value that is not a finite number above 0",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_bench_numeric_options_are_checked_before_the_work(
    cli: Cli, tmp_path: Path, args: list[str], says: str
) -> None:
    out, png = tmp_path / "out.json", tmp_path / "p.png"
    args = [a.format(out=out, png=png) for a in args]
    assert_refused(cli(*args), says)
    assert not out.exists() and not png.exists()


# -- bench fetch, backfill --serve, bench serverless --budget-ratio: checked before the work ---------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--concurrency", "0"], "--concurrency 0 is not a count of 1 or more"),  # was refused after the backfill
        (["--series", "0"], "--series 0 is not a count of 1 or more"),  # was "The trace has no values to backfill"
        (["--days", "-1"], "--days -1 is not a finite number above 0"),
        (["--days", "nan"], "--days nan is not a finite number above 0"),
        (["--days", "0.0001"], "--days 0.0001 holds no 10 s step"),
        (["--repeats", "0"], "--repeats 0 is not a count of 1 or more"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_bench_fetch_checks_its_numbers_before_making_or_backfilling_a_tsdb(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert_refused(cli("bench", "fetch", *args), says)
    assert not (tmp_path / "cache").exists()  # was an empty bench-tsdb-0x1d folder left behind
    tsdb = tmp_path / "tsdb"
    assert_refused(cli("bench", "fetch", "--tsdb", str(tsdb), *args), says)
    assert not tsdb.exists()


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_backfill_serve_checks_the_port_before_the_backfill(cli: Cli, tmp_path: Path, port: str) -> None:
    tsdb = tmp_path / "tsdb"
    result = cli("backfill", "--trace", "nasa-10s", "--tsdb", str(tsdb), "--metric", "m", "--serve", "--port", port)
    assert_refused(result, f"--port {port} is not a TCP port", "1 to 65535")
    assert not tsdb.exists()  # was backfilled first, then "Prometheus exited with code 1"


@pytest.mark.parametrize("ratio", ["nan", "inf", "-1"])
def test_bench_serverless_names_a_bad_budget_ratio_before_running(cli: Cli, tmp_path: Path, ratio: str) -> None:
    out = tmp_path / "b.json"
    result = cli("bench", "serverless", "--trace", "azure-functions-1m", "--json", str(out), "--budget-ratio", ratio)
    err = assert_refused(result, f"--budget-ratio {ratio} is not a finite number of 0 or more")
    assert "running" not in err and "PolicySpec" not in err  # was "invalid PolicySpec: warmPool.keepAliveBudgetRatio"
    assert not out.exists()


# -- bench replay --set: "write it without quotes" only for a quoted number --------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("nan", "targetUtilization: Input should be a finite number"),  # was "not the string 'nan' (write it ...)"
        ("inf", "targetUtilization: Input should be a finite number"),
        ("+7", "targetUtilization: Input should be less than or equal to 1"),  # a number as Python reads it
        ("half", "targetUtilization: Input should be a number, not the string 'half'"),
    ],
)
def test_replay_set_does_not_advise_removing_quotes_that_were_not_written(
    cli: Cli, tmp_path: Path, value: str, says: str
) -> None:
    out = tmp_path / "r.json"
    result = cli("bench", "replay", "--trace", "nasa-10s", "--json", str(out), "--set", f"targetUtilization={value}")
    err = assert_refused(result, "--set gives an invalid policy", says)
    assert "without quotes" not in err
    assert not out.exists()


def test_replay_set_still_advises_removing_quotes_around_a_number(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = cli("bench", "replay", "--trace", "nasa-10s", "--json", str(out), "--set", 'targetUtilization="0.5"')
    assert_refused(result, "not the string '0.5' (write it without quotes)")


@pytest.mark.parametrize("quoted", ['"nan"', "'.inf'"])
def test_a_quoted_nan_in_a_policy_file_gets_no_advice_to_unquote_it(quoted: str) -> None:
    from scaleahead.errors import ConfigError
    from scaleahead.policy import parse_policies

    example = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"
    text = example.read_text().replace("capacityPerReplica: 2.0", f"capacityPerReplica: {quoted}")
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    assert "not the string" in err.value.message and "without quotes" not in err.value.message


# -- series CSV: binary files, rows without a time, rows near float64's limit ------------------------


def test_a_binary_file_given_as_a_series_csv_is_named_as_not_text(tmp_path: Path) -> None:
    from scaleahead.errors import DataError
    from scaleahead.traces import load_series

    path = tmp_path / "binary.csv"
    path.write_bytes(bytes(range(256)) * 4)  # was pandas' "Error tokenizing data. C error: Expected 1 fields"
    with pytest.raises(DataError) as err:
        load_series(str(path))
    assert f"series CSV {path} is not a CSV text file: it holds binary data (a NUL byte at offset 0)" in str(err.value)
    assert "header line 'timestamp,value'" in str(err.value) and "tokenizing" not in str(err.value)


def test_a_binary_file_given_to_plan_is_refused_in_one_paragraph(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "binary.csv"
    path.write_bytes(bytes(range(256)) * 4)
    example = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(example), "--history", str(path), "--db", f"sqlite:///{db}")
    assert_refused(result, "is not a CSV text file")


@pytest.mark.parametrize(
    ("cell", "line"),
    [("nan", 4), ("", 4), ("NaN", 3)],
)
def test_a_row_without_a_timestamp_is_named_by_its_line(tmp_path: Path, cell: str, line: int) -> None:
    from scaleahead.errors import DataError
    from scaleahead.traces import load_series

    rows = ["1700000000,1", "1700000010,2", "1700000020,3", "1700000030,4"]
    rows[line - 2] = f"{cell},9"
    path = tmp_path / "s.csv"
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError) as err:
        load_series(str(path))  # was "Trace 's.csv' has rows without a timestamp", no line
    assert f"column 'timestamp' has 1 row(s) without a time (an empty cell, NaN or NaT; the first at line {line})" in (
        str(err.value)
    )


def test_an_iso_row_without_a_timestamp_is_named_by_its_line(tmp_path: Path) -> None:
    from scaleahead.errors import DataError
    from scaleahead.traces import load_series

    path = tmp_path / "s.csv"
    path.write_text("timestamp,value\n2024-01-01T00:00:00Z,1\n,2\n2024-01-01T00:00:20Z,3\n")
    with pytest.raises(DataError) as err:
        load_series(str(path))
    assert "the first at line 3" in str(err.value)


@pytest.mark.parametrize("repeat", [1, 2], ids=["one-row", "two-rows-at-one-time"])
def test_a_value_beyond_float32_in_a_series_csv_is_an_error_naming_it(tmp_path: Path, repeat: int) -> None:
    from scaleahead.errors import DataError
    from scaleahead.traces import load_series

    path = tmp_path / "s.csv"
    rows = [f"{1_700_000_000 + 10 * i},5" for i in range(10)] + [f"{1_700_000_100},1.7e308"] * repeat
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError) as err:
        # two rows: their mean overflowed to an infinite step, silently dropped; one row (or 30):
        # an overflow RuntimeWarning in the replay, while an infinite cell was an error
        load_series(str(path))
    assert (
        f"has {repeat} value(s) beyond 3.4e+38, the float32 limit (the first, 1.7e+308, at timestamp 1700000100)"
        in (str(err.value))
    )
    assert "leave those samples empty (missing)" in str(err.value)


def test_plan_refuses_a_history_csv_with_a_glitch(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    rows = [f"{1_700_000_000 + 10 * i},5" for i in range(400)] + [f"{1_700_004_000},1.7e308"] * 2
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    example = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(example), "--history", str(path), "--db", f"sqlite:///{db}")
    assert_refused(result, "beyond 3.4e+38")
    assert not db.exists()


# -- plan --policy A --policy A: the same file given twice ------------------------------------------


@pytest.mark.parametrize("how", ["same", "dot-slash", "symlink"])
def test_plan_says_when_one_policy_file_is_given_twice(cli: Cli, tmp_path: Path, how: str) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"
    a = tmp_path / "p.yaml"
    a.write_text(example.read_text())
    b = {"same": str(a), "dot-slash": str(tmp_path / "." / "p.yaml"), "symlink": str(tmp_path / "link.yaml")}[how]
    if how == "symlink":
        (tmp_path / "link.yaml").symlink_to(a)
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(a), "--policy", b, "--history", "nasa-10s", "--db", f"sqlite:///{db}")
    # was "Two policies target ... default/web (p.yaml:11) and default/web (p.yaml:11)"
    err = assert_refused(result, f"The same policy file was given twice: {a}", "Give each policy file once")
    assert "Two policies target" not in err
    assert not db.exists()


def test_plan_still_names_two_files_that_target_one_workload(cli: Cli, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "policy.yaml"
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(example.read_text())
    b.write_text(example.read_text())
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(a), "--policy", str(b), "--history", "nasa-10s", "--db", f"sqlite:///{db}")
    assert_refused(result, "Two policies target Deployment/default/web", f"{a}:11", f"{b}:11")
