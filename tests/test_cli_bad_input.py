"""Bad input to the CLI: one clear paragraph, exit code 2, nothing written (never a traceback).

Each case drives the real entry point (``scaleahead.cli.main``, what the console script runs) with
the input of an audit finding; without its fix each one raised a Python exception instead.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from forecaster.lstm import CheckpointError, LSTMForecaster
from scaleahead.errors import DataError
from scaleahead.traces import load_functions
from tests.conftest import Cli, as_typed_at_a_terminal, ctrl_c

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "policy.yaml"
V2 = REPO / "tests" / "forecaster" / "fixtures" / "lstm_v2_60s.pt"
T0 = 1_700_000_000


def series_csv(path: Path, n: int = 400, step: int = 10, scale: int = 1) -> Path:
    rows = [f"{(T0 + step * i) * scale},{20 + 10 * math.sin(i / 30):.3f}" for i in range(n)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def assert_refused(result: tuple[int, str, str], *says: str) -> None:
    code, _, err = result
    assert code == 2, err
    assert "error: " in err and "Traceback" not in err
    for text in says:
        assert text in err, err


# -- 1. time options --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("nan", "--at 'nan' is not a finite number"),
        ("inf", "--at 'inf' is not a finite number"),
        ("1e20", "--at '1e20' is outside the years 1900 to 9999"),
        ("1700000000000", "looks like milliseconds since the epoch: divide by 1000"),
    ],
)
def test_a_decision_time_that_is_no_time_is_refused_before_a_plan_is_stored(
    cli: Cli, tmp_path: Path, at: str, says: str
) -> None:
    # nan crashed in the planner; 1e20 stored a plan dated 1e20, then failed to print it.
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    result = cli("plan", "--policy", str(EXAMPLE), "--history", str(trace), "--at", at, "--db", f"sqlite:///{db}")
    assert_refused(result, says)
    assert not db.exists()


@pytest.mark.parametrize("command", ["run", "retrain"])
def test_run_and_retrain_refuse_a_bad_time_before_creating_their_database(
    cli: Cli, tmp_path: Path, command: str
) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    args = [
        command,
        "--policies",
        str(EXAMPLE),
        "--history",
        f"trace:{trace}",
        "--at",
        "nan",
        "--db",
        f"sqlite:///{db}",
    ]
    if command == "run":
        args += ["--once", "--target", "memory", "--no-server"]
    assert_refused(cli(*args), "--at 'nan' is not a finite number")
    assert not db.exists()


@pytest.mark.parametrize("command", ["run", "retrain"])
def test_run_and_retrain_refuse_artifacts_that_is_a_file_before_any_work(
    cli: Cli, tmp_path: Path, command: str
) -> None:
    # retrain fitted the model, created the database, then failed with a FileExistsError traceback.
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    taken = tmp_path / "notdb.sqlite"
    taken.write_bytes(b"someone's file")
    args = [command, "--policies", str(EXAMPLE), "--history", f"trace:{trace}", "--db", f"sqlite:///{db}"]
    if command == "run":
        args += ["--once", "--target", "memory", "--no-server"]
    assert_refused(cli(*args, "--artifacts", str(taken)), f"--artifacts {taken} is a file. Give a folder.")
    assert not db.exists() and taken.read_bytes() == b"someone's file"


@pytest.mark.parametrize(
    ("db", "says"),
    [
        ("postgres://u@localhost/x", "postgres:// is not a scheme SQLAlchemy knows"),
        ("folder", "is a folder, not a SQLite file"),
        ("theirs", "is not a scaleahead database"),
        ("theirs/sub/x.db", "Cannot create the folder for database"),  # under a file: no folder can be made
    ],
)
def test_retrain_refuses_a_bad_database_before_reading_history(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str, says: str
) -> None:
    # The history was read first (a minute from Prometheus at 1,000 workloads), then the --db
    # refused; here the history is Prometheus with no URL configured, which it would have said.
    import sqlite3

    monkeypatch.delenv("SCALEAHEAD_PROMETHEUS__URL", raising=False)
    (tmp_path / "folder").mkdir()
    with contextlib.closing(sqlite3.connect(tmp_path / "theirs")) as other:
        other.execute("CREATE TABLE notes (x)")
    url = db if "://" in db else f"sqlite:///{tmp_path / db}"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_refused(cli("retrain", "--policies", str(EXAMPLE), "--history", "prometheus", "--db", url), says)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--history", "bogus", "--target", "memory"], "--history 'bogus' is not known"),
        (["--history", "prometheus", "--target", "memory"], "No Prometheus URL is configured"),
        (
            ["--target", "kubernetes", "--kubeconfig", "/nonexistent/kc"],
            "The kubeconfig /nonexistent/kc does not exist",
        ),
    ],
)
def test_run_refuses_a_bad_history_or_kubeconfig_before_creating_its_database(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], says: str
) -> None:
    # Each created and migrated a new database (110 KB) before saying what was wrong.
    monkeypatch.delenv("SCALEAHEAD_PROMETHEUS__URL", raising=False)
    db = tmp_path / "f1.db"
    trace = series_csv(tmp_path / "s.csv")
    args = ["run", "--once", "--no-server", "--policies", str(EXAMPLE), "--db", f"sqlite:///{db}"]
    if "--history" not in extra:
        args += ["--history", f"trace:{trace}"]
    assert_refused(cli(*args, *extra), says)
    assert not db.exists()


def test_a_bad_time_names_the_option_it_was_given_to(cli: Cli, tmp_path: Path) -> None:
    trace = series_csv(tmp_path / "s.csv")
    common = ("bench", "replay", "--trace", str(trace), "--json", str(tmp_path / "r.json"))
    assert_refused(
        cli(*common, "--plot", str(tmp_path / "p.png"), "--plot-start", "garbage"),
        "--plot-start 'garbage' is not a time",
    )
    history = ("history", "--prometheus", "http://127.0.0.1:1", "--query", "up", "--output", str(tmp_path / "h.csv"))
    assert_refused(cli(*history, "--start", "nan", "--end", str(T0)), "--start 'nan' is not a finite number")
    assert_refused(cli(*history, "--start", str(T0), "--end", "inf"), "--end 'inf' is not a finite number")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "h.csv").exists()


# -- 2. and 3. series CSVs ----------------------------------------------------------------------


def test_a_series_in_epoch_milliseconds_is_refused_with_the_fix(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "ms.csv", scale=1000)
    result = cli("plan", "--policy", str(EXAMPLE), "--history", str(trace), "--db", f"sqlite:///{db}")
    assert_refused(result, "ms.csv: column 'timestamp'", "line 2", "divide by 1000")
    assert not db.exists()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p: p.write_bytes(b""), id="empty"),
        pytest.param(lambda p: p.write_bytes(b"timestamp,value\n\xff\xfe\x00\x01,2\n"), id="not-utf8"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--policy", str(EXAMPLE), "--history", "{f}", "--db", "{db}"],
        ["bench", "replay", "--trace", "{f}", "--json", "{tmp}/r.json"],
        ["train", "--trace", "{f}", "--db", "{db}", "--out", "{tmp}/models"],
        ["backfill", "--trace", "{f}", "--tsdb", "{tmp}/tsdb", "--metric", "m"],
        ["run", "--once", "--policies", str(EXAMPLE), "--history", "trace:{f}", "--target", "memory", "--db", "{db}"],
        ["demo", "--trace", "{f}"],
    ],
    ids=["plan", "bench-replay", "train", "backfill", "run", "demo"],
)
def test_an_empty_or_binary_csv_is_one_clear_error(
    cli: Cli, tmp_path: Path, make: Callable[[Path], None], argv: list[str]
) -> None:
    f = tmp_path / "t.csv"
    make(f)
    args = [a.format(f=f, db=f"sqlite:///{tmp_path / 'a.db'}", tmp=tmp_path) for a in argv]
    assert_refused(cli(*args), f"series CSV {f} is")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "tsdb").exists()


@pytest.mark.parametrize("option", [["--days", "0.5"], ["--end", "1995-07-03T00:00:00Z"]])
def test_train_on_a_trace_refuses_the_prometheus_range_options_it_would_ignore(
    cli: Cli, tmp_path: Path, option: list[str]
) -> None:
    """`train --trace X --days N` trained on the whole history split without a word (docs audit)."""
    db = tmp_path / "a.db"
    result = cli("train", "--trace", "nasa-10s", *option, "--db", f"sqlite:///{db}", "--out", str(tmp_path / "m"))
    assert_refused(result, f"{option[0]} only applies with --prometheus")
    assert not db.exists() and not (tmp_path / "m").exists()


# -- 4. and 5. Prometheus ---------------------------------------------------------------------


@contextlib.contextmanager
def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local HTTP server in a thread (the fake Prometheus), stopped at the end of the block."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Malformed(http.server.BaseHTTPRequestHandler):
    """A query_range endpoint whose answers are JSON of the right envelope but a broken matrix."""

    mode = "text"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        start, end, step = (float(form[k][0]) for k in ("start", "end", "step"))
        points = [[start + i * step, "abc"] for i in range(int((end - start) / step) + 1)]
        values: Any = points if self.mode == "text" else "oops"
        body = json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=["text", "oops"])
def malformed(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    handler = type("Handler", (_Malformed,), {"mode": request.param})
    with serve(handler) as url:
        yield url, request.param


def test_a_malformed_prometheus_answer_names_the_query_and_what_was_wrong(
    cli: Cli, tmp_path: Path, malformed: tuple[str, str]
) -> None:
    url, mode = malformed
    says = "malformed sample (sample 0 is [" if mode == "text" else 'a series is {"metric": {}, "values": "oops"}'
    out = tmp_path / "h.csv"
    history = cli(
        "history", "--prometheus", url, "--query", "sum(up)", "--start", str(T0), "--end", str(T0 + 600),
        "--output", str(out),
    )  # fmt: skip
    assert_refused(history, "Query 'sum(up)'", says)
    assert not out.exists()
    db = tmp_path / "a.db"
    plan = cli("plan", "--policy", str(EXAMPLE), "--prometheus", url, "--at", str(T0), "--db", f"sqlite:///{db}")
    assert_refused(plan, "sum(rate(http_requests_total", says)
    assert not db.exists()


def test_a_plain_web_server_in_place_of_prometheus_is_named_as_not_the_api(cli: Cli, tmp_path: Path) -> None:
    # python -m http.server answers the API's POST with 501: that is not a server in trouble.
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    with serve(Quiet) as url:
        result = cli(
            "history", "--prometheus", url, "--query", "up", "--start", str(T0), "--end", str(T0 + 60),
            "--output", str(tmp_path / "h.csv"),
        )  # fmt: skip
        assert_refused(result, "answered HTTP 501", "does not look like a Prometheus HTTP API", "path prefix")
        assert "health" not in result[2]
        # the command reads a query of no workload: it names none (was "Workload (history), ...")
        assert result[2].startswith("error: Query 'up': ") and "Workload" not in result[2], result[2]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--timeout", "-1"], "--timeout -1 is not a positive, finite number of seconds"),
        (["--timeout", "nan"], "--timeout nan is not a positive, finite number of seconds"),
        (["--step", "inf"], "--step must be a positive, finite duration, got 'inf'"),
    ],
)
def test_a_timeout_or_step_that_is_not_positive_and_finite_is_refused(
    cli: Cli, tmp_path: Path, extra: list[str], says: str
) -> None:
    result = cli(
        "history", "--prometheus", "http://127.0.0.1:1", "--query", "up", "--start", str(T0), "--end", str(T0 + 60),
        "--output", str(tmp_path / "h.csv"), *extra,
    )  # fmt: skip
    assert_refused(result, says)


# -- 6. report --------------------------------------------------------------------------------


def test_report_with_a_workload_that_is_not_a_key_is_refused_before_the_store_is_opened(
    cli: Cli, tmp_path: Path
) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    result = cli(
        "report", "--out", str(tmp_path / "r.html"), "--trace", str(trace), "--db", f"sqlite:///{db}",
        "--workload", "bogus",
    )  # fmt: skip
    assert_refused(result, "--workload 'bogus' is not a workload key Kind/namespace/name")
    assert not db.exists() and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"models": {"x": "y"}, "trace": "t"}, "field 'resolution_s' is not a positive number"),
        ({"models": [1, 2], "trace": "t", "resolution_s": 10}, "field 'models' is not an object"),
        ({"models": {"x": "y"}, "trace": "t", "resolution_s": 10}, "field 'models.x' is not an object"),
        (
            {"models": {"x": {"mae": "NaN", "wql": 1}}, "trace": "t", "resolution_s": 10},
            "field 'models.x.mae' is not a",
        ),
        ({"models": {}, "trace": 5, "resolution_s": 10}, "field 'trace' is not a trace name"),
    ],
)
def test_a_bench_json_of_the_wrong_shape_is_named(cli: Cli, tmp_path: Path, doc: dict[str, Any], says: str) -> None:
    js = tmp_path / "b.json"
    js.write_text(json.dumps(doc))
    assert_refused(cli("report", "--out", str(tmp_path / "r.html"), "--bench", str(js)), f"{js}: {says}")
    assert not (tmp_path / "r.html").exists()


# -- 7. functions CSVs ------------------------------------------------------------------------

HEADER = "HashFunction,HashOwner,HashApp,minute_1,minute_2,minute_3\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEADER + "fa,o,a,1,0,2\nfb,o,b,3,NaN,1\n", "function 'fb' (line 3) has 'NaN' in minute_2"),
        (HEADER.replace("minute_3", "minute_500x") + "fa,o,a,1,0,2\n", "column 'minute_500x' is not minute_N"),
        (HEADER.replace("minute_3", "minute_1") + "fa,o,a,1,0,2\n", "column minute_1 appears 2 times"),
        (HEADER + "fa,o,a,1,0,2\nfb,o,b,3\n", "line 3 has 4 cells but the header has 6"),
        ("", "functions CSV"),
    ],
    ids=["nan-cell", "bad-minute-column", "repeated-minute-column", "short-row", "empty-file"],
)
def test_a_functions_csv_with_a_bad_cell_header_or_row_is_refused(
    cli: Cli, tmp_path: Path, text: str, says: str
) -> None:
    f = tmp_path / "fn.csv"
    f.write_text(text)
    assert_refused(cli("bench", "serverless", "--trace", str(f), "--json", str(tmp_path / "s.json")), says)
    assert not (tmp_path / "s.json").exists()


def test_an_empty_cell_inside_a_row_is_still_an_idle_minute(tmp_path: Path) -> None:
    f = tmp_path / "fn.csv"
    f.write_text(HEADER + "fa,o,a,1,,2\nfb,o,b,,,\n")
    assert load_functions(str(f)).counts.tolist() == [[1, 0, 2], [0, 0, 0]]
    f.write_text(HEADER + "fa,o,a,1,0,NaN\n")
    with pytest.raises(DataError, match="has 'NaN' in minute_3"):
        load_functions(str(f))


# -- 8. checkpoints ---------------------------------------------------------------------------


def test_a_checkpoint_missing_its_keys_is_a_checkpoint_error_for_the_bench(cli: Cli, tmp_path: Path) -> None:
    ckpt = tmp_path / "v3missing.pt"
    torch.save({"format": "scaleahead-lstm", "format_version": 3}, ckpt)
    result = cli("bench", "forecast-speed", "--checkpoint", str(ckpt), "--series", "1", "--repeats", "1")
    assert_refused(result, f"LSTM checkpoint {ckpt} lacks 'spec', 'config'", "Retrain with `scaleahead train`")
    assert "fallback" not in result[2]  # a benchmark has no fallback model: that wording is the daemon's


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("quantiles", "abc", "malformed 'quantiles'"),
        ("quantiles", [0.1, 0.9], "malformed 'quantiles'"),
        ("calibration", [1.0], "malformed 'calibration'"),
        ("spec", 7, "malformed 'spec'"),
        ("state_dict", None, "does not match the network"),
    ],
)
def test_a_checkpoint_with_a_malformed_key_names_it(tmp_path: Path, key: str, value: Any, says: str) -> None:
    ckpt = torch.load(V2, weights_only=True)
    ckpt[key] = value
    path = tmp_path / "bad.pt"
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match=says):
        LSTMForecaster.load(path)


def test_a_version_2_checkpoint_without_its_config_is_a_checkpoint_error(tmp_path: Path) -> None:
    ckpt = torch.load(V2, weights_only=True)
    del ckpt["config"]
    torch.save(ckpt, tmp_path / "v2.pt")
    with pytest.raises(CheckpointError, match="format version 2.*lacks or has a malformed field"):
        LSTMForecaster.load(tmp_path / "v2.pt")


# -- 9. plan options that were silently ignored -----------------------------------------------


def test_plan_dry_run_without_apply_is_refused(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    result = cli("plan", "--policy", str(EXAMPLE), "--history", str(trace), "--dry-run", "--db", f"sqlite:///{db}")
    assert_refused(result, "--dry-run only goes with --apply")
    assert not db.exists()


@pytest.mark.parametrize("extra", [["--workload", "Deployment/default/web"], ["--column", "value"]])
def test_report_options_that_go_with_trace_are_refused_without_it(cli: Cli, tmp_path: Path, extra: list[str]) -> None:
    bench = tmp_path / "b.json"
    bench.write_text("{}")
    assert_refused(cli("report", "--bench", str(bench), *extra, "--out", str(tmp_path / "r")), "only goes with --trace")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--history", "{trace}", "--kubeconfig", "{tmp}/kubeconfig"], "--kubeconfig only goes with --apply"),
        (["--prometheus", "http://127.0.0.1:1", "--column", "value"], "--column only goes with --history"),
    ],
)
def test_plan_options_that_would_be_ignored_are_refused(cli: Cli, tmp_path: Path, extra: list[str], says: str) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    args = [a.format(trace=trace, tmp=tmp_path) for a in extra]
    assert_refused(cli("plan", "--policy", str(EXAMPLE), *args, "--db", f"sqlite:///{db}"), says)
    assert not db.exists()


def test_plan_capacity_for_a_tenant_no_policy_has_is_named_in_a_warning_and_a_note(cli: Cli, tmp_path: Path) -> None:
    trace = series_csv(tmp_path / "s.csv")
    code, out, err = cli(
        "plan", "--policy", str(EXAMPLE), "--history", str(trace), "--capacity", "nosuchtenant=3",
        "--output", "json", "--db", f"sqlite:///{tmp_path / 'a.db'}",
    )  # fmt: skip
    assert code == 0, err
    assert "warning" in err and "nosuchtenant" in err
    (note,) = [n for n in json.loads(out)["notes"] if "nosuchtenant" in n]
    assert "no policy has" in note and "default" in note


def test_a_settings_typo_is_refused_even_when_the_command_needs_no_setting(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --db given: the command reads no setting, but the typo still stops it (and creates nothing).
    monkeypatch.setenv("SCALEAHEAD_LOOP__INTERVALS", "5")
    db = tmp_path / "a.db"
    code, _, err = cli("models", "list", "--db", f"sqlite:///{db}")
    assert code == 2 and "SCALEAHEAD_LOOP__INTERVALS" in err and "interval_s" in err
    assert not db.exists()
    monkeypatch.delenv("SCALEAHEAD_LOOP__INTERVALS")
    monkeypatch.setenv("SCALEAHEAD_LOG__FORMAT", "xml")
    code, _, err = cli("crd")
    assert code == 2 and "SCALEAHEAD_LOG__FORMAT" in err


@pytest.mark.parametrize("argv", [["models", "list"], ["rollout", "status"]])
def test_an_unknown_output_format_is_refused(cli: Cli, tmp_path: Path, argv: list[str]) -> None:
    db = tmp_path / "a.db"
    assert cli("db", "upgrade", "--db", f"sqlite:///{db}")[0] == 0
    code, _, err = cli(*argv, "--db", f"sqlite:///{db}", "--output", "yaml")
    assert code == 2 and "'yaml' is not known: use table or json" in err
    if argv[0] == "models":
        code, out, _ = cli(*argv, "--db", f"sqlite:///{db}", "--output", "json")
        assert code == 0 and out.strip().startswith("[")


def test_the_default_model_follows_the_forecast_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from scaleahead.bench.replay import default_model_name

    monkeypatch.setenv("SCALEAHEAD_FORECAST__MODEL", "window_mean")
    assert default_model_name()[0] == "window_mean"
    monkeypatch.delenv("SCALEAHEAD_FORECAST__MODEL")
    assert default_model_name()[0] == "lstm"


def test_run_without_a_prometheus_url_names_the_setting_and_no_option_it_lacks(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli(
        "run", "--once", "--no-server", "--target", "memory", "--policies", str(EXAMPLE),
        "--db", f"sqlite:///{tmp_path / 'a.db'}",
    )  # fmt: skip
    assert code == 2 and "SCALEAHEAD_PROMETHEUS__URL" in err and "--history trace:NAME" in err
    assert "or pass --prometheus" not in err


def test_refusals_of_plan_and_run_options_create_no_database(cli: Cli, tmp_path: Path) -> None:
    """--at before the data, --apply with an unreadable kubeconfig, an unknown --target: exit 2 and no file."""
    trace = series_csv(tmp_path / "s.csv")
    cases = [
        (
            ["plan", "--policy", str(EXAMPLE), "--history", str(trace), "--at", "1990-01-01"],
            "no data before --at 1990-01-01T00:00:00Z",  # times as the user writes them, not epoch seconds
        ),
        (
            ["plan", "--policy", str(EXAMPLE), "--history", str(trace), "--apply", "--kubeconfig", str(tmp_path / "k")],
            "The kubeconfig " + str(tmp_path / "k") + " does not exist",
        ),
        (["run", "--once", "--no-server", "--policies", str(EXAMPLE), "--history", "trace:nasa-10s", "--target", "foo"],
         "--target 'foo' is not known"),
    ]  # fmt: skip
    for i, (argv, says) in enumerate(cases):
        db = tmp_path / f"db{i}.db"
        code, _, err = cli(*argv, "--db", f"sqlite:///{db}")
        assert code == 2 and says in err, err
        assert not db.exists(), argv


def test_plan_takes_the_policies_of_every_repeated_policy_option(cli: Cli, tmp_path: Path) -> None:
    api = tmp_path / "api.yaml"
    api.write_text(EXAMPLE.read_text().replace("  name: web\n", "  name: api\n"))
    code, out, err = cli(
        "plan", "--policy", str(EXAMPLE), "--policy", str(api), "--history", "nasa-10s", "--output", "json",
        "--db", f"sqlite:///{tmp_path / 'a.db'}",
    )  # fmt: skip
    assert code == 0, err
    targets = {a["target"] for a in json.loads(out)["actions"] if a["kind"] == "ScaleTo"}
    assert {t.rsplit("/", 1)[-1] for t in targets} >= {"web", "api"}
    code, _, err = cli("plan", "--policy", str(EXAMPLE), "--policy", str(EXAMPLE), "--history", "nasa-10s")
    assert code == 2 and f"The same policy file was given twice: {EXAMPLE}" in err, err


def test_models_show_says_null_for_a_version_without_an_artifact_file(cli: Cli, tmp_path: Path) -> None:
    from storage import Store

    url = f"sqlite:///{tmp_path / 'a.db'}"
    mid = Store(url).register_model("seasonal_naive", "seasonal_naive")
    code, out, err = cli("models", "show", str(mid), "--db", url)
    assert code == 0, err
    assert json.loads(out)["artifact_ok"] is None


def test_a_column_for_a_trace_with_one_series_is_refused(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    code, _, err = cli(
        "plan", "--policy", str(EXAMPLE), "--history", "nasa-10s", "--column", "foo", "--db", f"sqlite:///{db}"
    )
    assert code == 2 and "'nasa-10s' has one demand series" in err and "Leave --column out" in err
    assert not db.exists()


def test_ctrl_c_ends_a_command_with_exit_130_and_says_so(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    out = tmp_path / "serverless.json"
    proc = subprocess.Popen(  # a command of minutes (`run` stops gracefully on SIGINT, exit 0, by design)
        [sys.executable, "-m", "scaleahead.cli", "bench", "serverless", "--trace", "azure-functions-1m"]
        + ["--json", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_typed_at_a_terminal,
    )
    assert proc.stderr is not None
    seen = ""
    while "running" not in seen:  # inside the command, past the imports and the trace's loading
        line = proc.stderr.readline()
        assert line, f"the command ended before it ran: {seen}"
        seen += line
    time.sleep(0.5)
    code, err, state = ctrl_c(proc, seen)
    assert code == 130, f"{err}\n{state}"  # was 0: a script's `&&` went on as if it had succeeded
    assert "interrupted" in err
    assert not out.exists()


def test_an_output_in_a_folder_that_cannot_be_written_is_refused_before_the_work(tmp_path: Path) -> None:
    import subprocess
    import sys

    from scaleahead.commands import check_folder, check_output
    from scaleahead.errors import UserError

    # /proc cannot be written even by root (as a read-only mount or a full disk): refused at once.
    with pytest.raises(UserError, match="cannot be written"):
        check_output(Path("/proc/scaleahead.json"), "--json")
    with pytest.raises(UserError, match="--out /proc/models cannot be created"):
        check_folder(Path("/proc/models"), "--out")
    check_folder(tmp_path / "new" / "models", "--out")  # made, and writable
    assert (tmp_path / "new" / "models").is_dir() and not list((tmp_path / "new" / "models").iterdir())
    proc = subprocess.run(  # before: 27 s of training, then a PermissionError traceback
        [sys.executable, "-m", "scaleahead.cli", "train", "--trace", "nasa-10s", "--out", "/proc/models"]
        + ["--db", f"sqlite:///{tmp_path / 'm.db'}", "--epochs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--out /proc/models cannot be created" in proc.stderr
    assert "training" not in proc.stderr and "Traceback" not in proc.stderr


def test_noise_floor_checks_its_json_before_the_work(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from scaleahead.bench import noise_floor

    def ran(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the diagnostic ran before its --json was checked")

    monkeypatch.setattr(noise_floor, "run", ran)  # before: it ran, then IsADirectoryError at the end
    csv = series_csv(tmp_path / "s.csv")
    assert_refused(cli("bench", "noise-floor", "--trace", str(csv), "--json", str(tmp_path)), "is a folder")


@pytest.mark.parametrize("where", ["folder", "missing"])
def test_forecast_speed_checks_its_json_before_the_work(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    def built(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the network was built before --json was checked")

    monkeypatch.setattr(LSTMForecaster, "untrained", built)  # before: timed, then a traceback at the end
    path = tmp_path if where == "folder" else tmp_path / "none" / "x.json"
    says = "is a folder" if where == "folder" else "does not exist"
    assert_refused(cli("bench", "forecast-speed", "--series", "1", "--repeats", "1", "--json", str(path)), says)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--prometheus", "http://127.0.0.1:9"], "--prometheus needs --policy"),
        (["--trace", "none.csv"], "none.csv"),
        (["--trace", "s.csv", "--epochs", "0"], "--epochs 0 would train nothing"),
    ],
)
def test_a_refused_train_leaves_no_out_folder_or_database(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], says: str
) -> None:
    from scaleahead.commands import check_folder
    from scaleahead.errors import UserError

    monkeypatch.chdir(tmp_path)
    series_csv(tmp_path / "s.csv")
    db = tmp_path / "m.db"
    assert_refused(cli("train", *argv, "--db", f"sqlite:///{db}"), says)
    assert not (tmp_path / "models").exists()  # the default --out was made before the refusal
    assert not db.exists()
    check_folder(tmp_path / "a" / "b", "--out", create=False)  # makeable, but not made
    assert not (tmp_path / "a").exists()
    with pytest.raises(UserError, match="--out /proc/a/b cannot be created"):
        check_folder(Path("/proc/a/b"), "--out", create=False)


def test_an_unknown_schema_revision_or_a_tsdb_that_is_a_file_creates_nothing(tmp_path: Path) -> None:
    import subprocess
    import sys

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "scaleahead.cli", *argv], capture_output=True, text=True)

    db = tmp_path / "up.db"
    out = cli("db", "upgrade", "--db", f"sqlite:///{db}", "--revision", "bogus")
    assert out.returncode == 2 and "Unknown schema revision 'bogus'" in out.stderr
    assert not db.exists()  # was left behind as an empty file
    afile = tmp_path / "tsdb"
    afile.write_text("")
    out = cli("backfill", "--trace", "nasa-10s", "--tsdb", str(afile), "--metric", "x")
    assert out.returncode == 2 and "is a file" in out.stderr and "Traceback" not in out.stderr


def test_retrain_at_a_time_before_the_trace_says_where_the_trace_starts(cli: Cli, tmp_path: Path) -> None:
    """It said "No workload has history to retrain on" (an operator audit); `run` names the trace's start."""
    db = tmp_path / "r.db"
    result = cli(
        "retrain",
        "--policies",
        str(EXAMPLE),
        "--history",
        "trace:nasa-10s",
        "--at",
        "1990-01-01",
        "--db",
        f"sqlite:///{db}",
    )
    assert_refused(
        result, "has no data before --at 1990-01-01T00:00:00Z (its first step starts at 1995-07-01T04:00:00Z"
    )
    assert not db.exists()
