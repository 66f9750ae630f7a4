"""Trace loading on the real shared traces and on bad files."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from scaleahead.errors import DataError
from scaleahead.traces import load_functions, load_series, split_of


def test_nasa_outage_and_missing_days_are_nan_not_zero() -> None:
    s = load_series("nasa-10s")
    assert s.step_s == 10.0
    # 1995-08-02 12:00 UTC lies inside the Hurricane Erin outage.
    i = s.index_of(807364800.0)
    assert np.isnan(s.values[i])
    assert np.nanmax(s.values) == 78


def test_alibaba_has_eight_days_at_10s() -> None:
    s = load_series("alibaba-cpu-10s")
    assert s.step_s == 10.0
    assert 8 * 8640 - 10 <= len(s) <= 8 * 8640
    assert 14 < np.nanmin(s.values) < np.nanmax(s.values) < 81


def test_azure_functions_split_is_360_minutes() -> None:
    fns = load_functions("azure-functions-1m")
    assert fns.counts.shape == (1000, 1440)
    assert int(fns.counts.sum()) == 608228
    s = load_series("azure-functions-1m")
    sp = split_of(s, "azure-functions-1m")
    assert sp.test_start - sp.start == 360 * 60


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(DataError, match="nasa-10s"):
        load_series("nasa-1s")


def test_non_monotonic_timestamps_are_an_error(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n2024-01-01T00:00:10Z,1\n2024-01-01T00:00:00Z,2\n")
    with pytest.raises(DataError, match="non-monotonic") as err:
        load_series(str(f))
    # The times are shown as read (UTC) with the number, by file line as the other errors of a CSV (a newcomer
    # audit: "row 2" was line 3), and the fix names the daylight-saving trap.
    assert "line 3 (2024-01-01T00:00:00Z, 1704067200) does not come after line 2 (2024-01-01T00:00:10Z" in str(
        err.value
    )
    assert "daylight saving time" in err.value.fix


def test_naive_local_times_across_the_end_of_daylight_saving_time_are_refused_with_the_reason(tmp_path: Path) -> None:
    """Europe/Berlin's local times without a zone repeat 02:00-03:00 on 2024-10-27: read as UTC they
    go back an hour. Sorting them (the old advice alone) would merge two different hours."""
    rows = [f"2024-10-27T0{h}:{m:02d}:00,1" for h in (1, 2) for m in range(0, 60, 10)]
    rows += [f"2024-10-27T02:{m:02d}:00,2" for m in range(0, 60, 10)]
    f = tmp_path / "berlin.csv"
    f.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError, match="2024-10-27T02:00:00Z") as err:
        load_series(str(f))
    assert "give such times with their offset" in err.value.fix


def test_gaps_and_empty_cells_stay_missing(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n0,1\n10,\n20,3\n60,4\n")
    s = load_series(str(f))
    assert s.step_s == 10
    assert np.isnan(s.values[1]) and np.isnan(s.values[3]) and s.values[6] == 4


def test_a_value_that_is_not_a_number_is_an_error_not_a_silent_gap(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n0,1\n10,NaN\n20,\n30,12 req/s\n40,4\n50,x\n")
    with pytest.raises(DataError, match=r"2 value\(s\) that are not numbers \(first at line 5: '12 req/s'\)"):
        load_series(str(f))
    f.write_text("timestamp,value\n0,1\n10,NaN\n20,\n30,null\n40,4\n")  # the usual spellings of missing
    assert np.isnan(load_series(str(f)).values[1:4]).all()
    f.write_text("timestamp,value\n0,1\n10,nan\n20,NAN\n30,NA\n40,NULL\n50,4\n")  # (NumPy writes nan)
    assert np.isnan(load_series(str(f)).values[1:5]).all()


@pytest.mark.parametrize("cell", ["N/A", "n/a", "#N/A", "None", "-nan", "<NA>", "1.#QNAN", "-1.#IND", "Nan"])
def test_other_words_for_missing_are_errors_too_not_silent_gaps(tmp_path: Path, cell: str) -> None:
    """Only an empty cell, NaN, NA and null are missing (docs/cli.md); pandas' own list of missing
    words took these as gaps without a word (found by a docs audit)."""
    f = tmp_path / "s.csv"
    f.write_text(f"timestamp,value\n0,1\n10,{cell}\n20,3\n")
    with pytest.raises(
        DataError, match=f"1 value\\(s\\) that are not numbers \\(first at line 3: '{re.escape(cell)}'\\)"
    ):
        load_series(str(f))


@pytest.mark.parametrize(("cell", "shown"), [("x", "'x'"), ("-2", "-2"), ("1.5", "1.5"), ("inf", "inf")])
def test_an_invocation_count_that_is_not_a_whole_number_is_an_error(tmp_path: Path, cell: str, shown: str) -> None:
    f = tmp_path / "f.csv"
    f.write_text(f"HashFunction,HashOwner,HashApp,minute_1,minute_2\nfa,o,a,1,0\nfb,o,b,3,{cell}\n")
    with pytest.raises(DataError, match=f"function 'fb' \\(line 3\\) has {shown} in minute_2"):
        load_functions(str(f))


def test_an_empty_invocation_cell_is_an_idle_minute(tmp_path: Path) -> None:
    f = tmp_path / "f.csv"
    f.write_text("HashFunction,HashOwner,HashApp,minute_1,minute_2\nfa,o,a,1,\nfb,o,b,,2\n")
    assert load_functions(str(f)).counts.tolist() == [[1, 0], [0, 2]]


def test_a_memory_that_is_not_a_positive_number_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "f.csv"
    f.write_text("HashFunction,HashOwner,HashApp,minute_1\nfa,o,a,1\n")
    m = tmp_path / "m.csv"
    m.write_text("HashOwner,HashApp,AverageAllocatedMb\no,a,-5\n")
    with pytest.raises(DataError, match="AverageAllocatedMb must be a positive number; line 2 has '-5'"):
        load_functions(str(f), memory=str(m))


def test_a_durations_file_without_its_columns_or_unreadable_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "f.csv"
    f.write_text("HashFunction,HashOwner,HashApp,minute_1\nfa,o,a,1\n")
    d = tmp_path / "d.csv"
    d.write_text("HashFunction,Mean\nfa,12\n")
    with pytest.raises(DataError, match="lacks HashFunction/Average"):
        load_functions(str(f), durations=str(d))
    (tmp_path / "d.csv.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(DataError, match="Cannot read"):
        load_functions(str(f), durations=str(tmp_path / "d.csv.gz"))
    d.write_text("HashFunction,Average\nfa,12.5\n")
    assert load_functions(str(f), durations=str(d)).mean_duration_ms.tolist() == [12.5]


def test_a_negative_demand_value_is_an_error_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n0,1\n10,-3.5\n20,\n30,-1\n")
    with pytest.raises(DataError, match=r"2 negative value\(s\) \(the first, -3.5, at timestamp 10\)"):
        load_series(str(f))


def test_an_infinite_demand_value_is_an_error_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n0,1\n10,inf\n20,\n")
    with pytest.raises(DataError, match=r"1 infinite value\(s\) \(the first at timestamp 10\)"):
        load_series(str(f))


def test_functions_csv_with_wrong_header_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "f.csv"
    f.write_text("HashFunction,minute_1\na,1\n")
    with pytest.raises(DataError, match="not a functions CSV"):
        load_functions(str(f))


def test_a_sample_stamped_off_the_grid_is_never_known_before_its_own_step_ends(tmp_path: Path) -> None:
    """A CSV row covers the step that starts at its time. A sample stamped 4 s late on a 10 s grid
    went to the nearest step, whose end came 4 s before its own: a plan at +12 s read the sample
    of +4 s (found in review). It now goes to the next step; one stamped early stays in its own."""
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n0,1\n10,2\n20,3\n34,400\n38,5\n46,6\n")
    s = load_series(str(f))
    assert s.step_s == 10
    # +34 and +38 share the step [40, 50) (averaged), +46 goes to [50, 60); [30, 40) has none
    assert np.isnan(s.values[3]) and s.values[4] == (400 + 5) / 2 and s.values[5] == 6
    for at in (34.0, 38.0, 44.0, 48.0, 49.9):  # before the samples' own steps end
        assert not (s.known_by(at).values > 100).any(), at
    assert s.known_by(50.0).values[-1] == 202.5  # known once [40, 50) ends, after both ended


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ("1700000000,1\n1700000010,2\nyesterday,3\n1700000030,4\n", "holds epoch seconds, but 1 value(s) are not"),
        (
            "2024-01-01T00:00:00Z,1\n2024-01-01T00:00:10Z,2\nyesterday,3\n",
            "are not ISO-8601 times (first at line 4: 'yesterday')",
        ),
    ],
    ids=["epoch", "iso"],
)
def test_a_timestamp_that_is_no_time_is_named_by_its_line(tmp_path: Path, rows: str, says: str) -> None:
    """Found in review: a stray word among epoch seconds read as the year 1700000000."""
    f = tmp_path / "s.csv"
    f.write_text("timestamp,value\n" + rows)
    with pytest.raises(DataError) as err:
        load_series(str(f))
    assert says in err.value.message and "line 4" in err.value.message


def test_jittered_timestamps_are_warned_about_and_a_stray_late_sample_is_not(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """Half a second of jitter on a 10 s grid sends a quarter of the samples into the next step
    (averaged there, their own step empty): a warning says so and what to do. One late sample in
    a long series (NAB's traces have one) is not jitter."""
    import logging

    import numpy as np

    rng = np.random.default_rng(0)
    t = 1_700_000_000 + 10.0 * np.arange(2000)
    jittered = t + np.where(rng.random(2000) < 0.25, 0.5, 0.0)
    f = tmp_path / "jitter.csv"
    f.write_text("timestamp,value\n" + "".join(f"{x:.1f},{i % 7}\n" for i, x in enumerate(jittered)))
    caplog.set_level(logging.WARNING)
    s = load_series(str(f))
    (warned,) = [r for r in caplog.records if getattr(r, "event", "") == "series_off_grid"]
    assert "stamped off its 10 s grid" in warned.getMessage() and "round the timestamps" in warned.getMessage()
    assert warned.slid_steps > 200 and np.isnan(s.values).sum() > 200  # type: ignore[attr-defined]
    caplog.clear()
    one = t.copy()
    one[1000] += 0.5
    g = tmp_path / "one.csv"
    g.write_text("timestamp,value\n" + "".join(f"{x:.1f},1\n" for x in one))
    load_series(str(g))
    assert not [r for r in caplog.records if getattr(r, "event", "") == "series_off_grid"]
    # On the grid, 2 % missed scrapes and 2 % duplicated rows: not jitter (the second review's case).
    caplog.clear()
    keep = t[rng.random(2000) >= 0.02]
    rows = np.sort(np.concatenate([keep, keep[rng.random(len(keep)) < 0.02]]))
    h = tmp_path / "dups.csv"
    h.write_text("timestamp,value\n" + "".join(f"{x:.1f},1\n" for x in rows))
    load_series(str(h))
    assert not [r for r in caplog.records if getattr(r, "event", "") == "series_off_grid"]


@pytest.mark.parametrize("name", ["nab-*", "nab-[a-z]*", "nab-ec2_cpu_utilization_24ae8?", "nab-../../worldcup98/x"])
def test_a_nab_name_is_an_exact_file_stem_not_a_pattern(name: str) -> None:
    """Until 2026-12-07 the stem was a glob pattern: 'nab-*' planned silently with the first file,
    and '..' reached outside nab_real (a review)."""
    with pytest.raises(DataError, match="Unknown NAB trace") as err:
        load_series(name)
    assert "nab-nyc_taxi" in str(err.value)  # the known names are listed


@pytest.mark.parametrize(
    ("rows", "line"),
    [("now,1\ntoday,2\n", "line 2: 'now'"), ("01/02/2024 00:00:00,1\n01/02/2024 00:05:00,2\n", "line 2")],
)
def test_a_series_csv_time_that_is_not_iso_8601_is_refused_naming_the_line(
    tmp_path: Path, rows: str, line: str
) -> None:
    """Until 2026-12-07 any format pandas could guess was read: "now" as the wall clock, and
    01/02/2024 month first, so a day-first export moved by a month (a review)."""
    path = tmp_path / "s.csv"
    path.write_text("timestamp,value\n" + rows)
    with pytest.raises(DataError, match="not ISO-8601") as err:
        load_series(str(path))
    assert line in str(err.value)


def test_iso_8601_times_with_a_space_offsets_and_fractions_still_load(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(
        "timestamp,value\n2024-01-01 00:00:00,1\n2024-01-01T00:00:10Z,2\n2024-01-01T02:00:20+02:00,3\n"
        "2024-01-01T00:00:30.000Z,4\n"
    )
    s = load_series(str(path))
    assert s.step_s == 10.0 and list(s.values) == [1.0, 2.0, 3.0, 4.0]


def test_an_unknown_trace_name_lists_the_nab_names_not_a_placeholder() -> None:
    with pytest.raises(DataError) as err:
        load_series("nasa-1Os")
    said = str(err.value)
    assert "nab-nyc_taxi" in said and "nab-<file stem>" not in said and "nasa-10s" in said


def test_a_gzipped_csv_without_the_gz_suffix_is_named_as_such(tmp_path: Path) -> None:
    """Until 2026-12-07: "is not UTF-8 text ... it is not a CSV file"."""
    import gzip

    path = tmp_path / "series.csv"
    path.write_bytes(gzip.compress(b"timestamp,value\n1700000000,1\n1700000010,2\n"))
    with pytest.raises(DataError, match="gzip-compressed") as err:
        load_series(str(path))
    assert "series.csv.gz" in str(err.value)


def test_a_function_repeated_in_the_functions_csv_is_refused_naming_the_line(tmp_path: Path) -> None:
    """Until 2026-12-07 a repeated row was a second function, counted twice in every metric."""
    f = tmp_path / "fns.csv"
    f.write_text("HashFunction,HashOwner,HashApp,minute_1,minute_2\nfa,o,a,1,0\nfb,o,b,3,1\nfa,o,a,1,0\n")
    with pytest.raises(DataError, match="appears more than once") as err:
        load_functions(str(f))
    assert "line 4" in str(err.value)
    # Another app's function with the same HashFunction: the decisions file and the durations CSV
    # name functions by HashFunction alone, so its rows could not be told apart (a review, 2026-12-07).
    f.write_text("HashFunction,HashOwner,HashApp,minute_1,minute_2\nfa,o,a,1,0\nfa,o,b,3,1\n")
    with pytest.raises(DataError, match="HashFunction 'fa' names functions of 2 apps") as shared:
        load_functions(str(f))
    assert "line 3" in str(shared.value) and "its own HashFunction" in str(shared.value)
