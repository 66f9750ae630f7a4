"""Bad input that used to pass silently: one clear error (exit 2), nothing written.

1. ``report --trace T --db sqlite:///missing.db`` created the missing database.
2. Boolean policy fields took ``"yes"``, ``"on"``, ``1`` or ``"true"`` as true (pydantic's lax mode).
3. A functions CSV with a gap in its ``minute_N`` columns (``minute_1, minute_2, minute_5``) had every
   later minute shifted earlier; a repeated ``minute_N`` was named by pandas' renamed copy.
4. A series CSV at one step planned with a policy of another ``demand.stepSeconds``: the policy's
   step was ignored and demand counted per 60 s was read as if per 10 s.

Each case drives the real entry point (``scaleahead.cli.main``, what the console script runs) with
real files and real SQLite, in the style of tests/test_cli_bad_input.py.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaleahead.errors import ConfigError, DataError
from scaleahead.policy import load_policies, parse_policies, policy_json_schema
from scaleahead.traces import load_functions
from tests.conftest import Cli

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "policy.yaml"
T0 = 1_700_000_000


def _drop_stale_log_handlers() -> None:
    """``run`` in process (here or in an earlier test file) routes the root logger to the stderr of
    its test, closed since: later logging (alembic's, on opening a database) would print "Logging
    error" tracebacks into another test's stderr."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if type(h) is logging.StreamHandler and getattr(h.stream, "closed", False):
            root.removeHandler(h)


@pytest.fixture(autouse=True)
def _no_stale_log_handlers() -> Iterator[None]:
    _drop_stale_log_handlers()
    yield
    _drop_stale_log_handlers()


def series_csv(path: Path, n: int = 400, step: float = 10) -> Path:
    rows = [f"{T0 + step * i},{20 + 10 * math.sin(i / 30):.3f}" for i in range(n)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def assert_refused(result: tuple[int, str, str], *says: str) -> str:
    code, _, err = result
    assert code == 2, err
    assert "error: " in err and "Traceback" not in err
    for text in says:
        assert text in err, err
    return err


# -- 1. report does not create a missing database ---------------------------------------------------


@pytest.mark.parametrize("where", ["missing.db", "no/such/folder/missing.db"], ids=["file", "file-and-folder"])
def test_report_refuses_a_missing_database_and_creates_nothing(cli: Cli, tmp_path: Path, where: str) -> None:
    db = tmp_path / where
    trace = series_csv(tmp_path / "s.csv")
    out = tmp_path / "x.html"
    result = cli("report", "--trace", str(trace), "--db", f"sqlite:///{db}", "--out", str(out))
    assert_refused(result, f"No scaleahead database at {db}", "scaleahead db upgrade", "nothing was created")
    assert not db.exists() and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]  # no file, no folder, no report


def test_report_refuses_an_empty_file_as_a_database(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.write_bytes(b"")  # e.g. a `touch`ed path: no tables, so not a scaleahead database
    trace = series_csv(tmp_path / "s.csv")
    result = cli("report", "--trace", str(trace), "--db", f"sqlite:///{db}", "--out", str(tmp_path / "x.html"))
    assert_refused(result, f"No scaleahead database at {db} (the file has no tables)")
    assert db.read_bytes() == b"" and not (tmp_path / "x.html").exists()


def test_report_on_an_existing_database_without_forecasts_still_says_so(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    assert cli("db", "upgrade", "--db", f"sqlite:///{db}")[0] == 0
    trace = series_csv(tmp_path / "s.csv")
    result = cli("report", "--trace", str(trace), "--db", f"sqlite:///{db}", "--out", str(tmp_path / "x.html"))
    assert_refused(
        result,
        "No stored forecasts in sqlite:///",
        "It holds none: `scaleahead run` stores the forecasts it plans with (`scaleahead plan` stores only its plan)",
    )
    assert not (tmp_path / "x.html").exists()
    # a workload it holds no forecasts of: the ones it holds are listed (was a Python list repr)
    import numpy as np

    from scaleahead.types import Forecast, WorkloadRef
    from storage import Store

    store = Store(f"sqlite:///{db}")
    store.record_forecasts([Forecast(WorkloadRef("Deployment", "shop", "web"), 1.7e9, 10.0, {0.5: np.ones(90)})])
    store.close()
    result = cli(
        "report", "--trace", str(trace), "--db", f"sqlite:///{db}", "--out", str(tmp_path / "x.html"),
        "--workload", "Deployment/shop/nope",
    )  # fmt: skip
    assert_refused(result, "for Deployment/shop/nope.", "It holds forecasts of: Deployment/shop/web.")


# -- 2. boolean policy fields are strict ------------------------------------------------------------


def _bool_fields(schema: dict[str, Any], defs: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of every ``boolean`` field of the spec schema (nested objects included)."""
    out: list[tuple[str, ...]] = []
    for name, node in schema.get("properties", {}).items():
        if "$ref" in node:
            out += _bool_fields(defs[node["$ref"].rsplit("/", 1)[-1]], defs, (*prefix, name))
        elif node.get("type") == "boolean" or any(s.get("type") == "boolean" for s in node.get("anyOf", [])):
            out.append((*prefix, name))
    return out


SCHEMA = policy_json_schema()
BOOL_FIELDS = _bool_fields(SCHEMA, SCHEMA.get("$defs", {}))


def _example() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return doc


def _with(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out["spec"]
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return out


def test_every_boolean_field_is_found() -> None:
    assert set(BOOL_FIELDS) >= {
        ("warmPool", "enabled"),
        ("startupLearning", "enabled"),
        ("startupLearning", "allowShorter"),
        ("objective", "riskAdaptation", "enabled"),
    }


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("yes", "the string 'yes'"),
        ("on", "the string 'on'"),
        ("true", "the string 'true'"),
        ("false", "the string 'false'"),
        ("1", "the string '1'"),
        (1, "the integer 1"),
        (0, "the integer 0"),
        (1.0, "the number 1.0"),
        (None, "null"),
    ],
    ids=["'yes'", "'on'", "'true'", "'false'", "'1'", "1", "0", "1.0", "null"],
)
@pytest.mark.parametrize("path", BOOL_FIELDS, ids=".".join)
def test_no_boolean_field_takes_anything_but_true_or_false(path: tuple[str, ...], value: Any, shown: str) -> None:
    text = yaml.safe_dump(_with(_example(), path, value), sort_keys=False)  # strings are written quoted
    with pytest.raises(ConfigError) as err:
        parse_policies(text, "p.yaml")
    field = "spec." + ".".join(path)
    assert f": field '{field}': Input should be true or false" in err.value.message
    assert f"not {shown}" in err.value.message
    assert "write true or false without quotes" in err.value.message


def test_a_quoted_boolean_names_file_line_and_field_in_the_cli_and_creates_no_database(
    cli: Cli, tmp_path: Path
) -> None:
    text = EXAMPLE.read_text().replace("    enabled: false\n", '    enabled: "yes"\n', 1)
    assert text != EXAMPLE.read_text()
    pol = tmp_path / "p.yaml"
    pol.write_text(text)
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if 'enabled: "yes"' in t)
    result = cli("plan", "--policy", str(pol), "--history", str(trace), "--db", f"sqlite:///{db}")
    assert_refused(
        result,
        f"{pol}:{line}: field 'spec.warmPool.enabled': Input should be true or false",
        "not the string 'yes'",
    )
    assert not db.exists()


def test_true_and_false_still_load_and_keep_their_value() -> None:
    for path in BOOL_FIELDS:
        for value in (True, False):
            (policy,) = parse_policies(yaml.safe_dump(_with(_example(), path, value)), "p.yaml")
            node: Any = policy.spec
            for part in path:
                node = getattr(node, next(k for k, f in type(node).model_fields.items() if f.alias == part))
            assert node is value


def test_the_shipped_policies_and_the_custom_resource_form_still_load() -> None:
    from scaleahead.policy import Policy

    assert load_policies(EXAMPLE)
    for path in sorted(REPO.glob("examples/**/*.yaml")) + sorted(REPO.glob("deploy/**/*polic*.yaml")):
        if "PredictiveScalingPolicy" in path.read_text() and "CustomResourceDefinition" not in path.read_text():
            assert load_policies(path), path
    doc = _example()  # what the Kubernetes client hands over: JSON booleans
    doc["spec"]["warmPool"]["enabled"] = True
    assert Policy.model_validate(doc).spec.warm_pool.enabled is True


# -- 3. functions CSVs: minute_1 ... minute_M, none missing, none repeated ---------------------------


def _functions_csv(path: Path, minutes: list[str]) -> Path:
    cells = ",".join(str(k + 1) for k in range(len(minutes)))
    path.write_text(f"HashFunction,HashOwner,HashApp,{','.join(minutes)}\nfa,o,a,{cells}\n")
    return path


@pytest.mark.parametrize(
    ("minutes", "says"),
    [
        (
            ["minute_1", "minute_2", "minute_5"],
            "minute_3, minute_4 (2 of minute_1 ... minute_5) are missing",
        ),
        (["minute_3", "minute_4"], "minute_1, minute_2 (2 of minute_1 ... minute_4) are missing"),
        (["minute_2"], "minute_1 (1 of minute_1 ... minute_2) is missing"),
        (
            ["minute_1", *[f"minute_{k}" for k in range(300, 1441)]],
            "minute_2, minute_3, minute_4, minute_5, minute_6, ... (298 of minute_1 ... minute_1440) are missing",
        ),
        (["minute_1", "minute_2", "minute_2", "minute_3"], "column minute_2 appears 2 times"),
        (["minute_1", "minute_2", "minute_1", "minute_1"], "column minute_1 appears 3 times"),
    ],
    ids=["gap", "not-from-1", "only-minute-2", "many-missing", "repeated", "three-times"],
)
def test_a_functions_csv_with_missing_or_repeated_minutes_is_refused(
    cli: Cli, tmp_path: Path, minutes: list[str], says: str
) -> None:
    f = _functions_csv(tmp_path / "fn.csv", minutes)
    result = cli("bench", "serverless", "--trace", str(f), "--json", str(tmp_path / "s.json"))
    err = assert_refused(result, f"{f}: ", says)
    assert "minute_1 is the first minute of the trace" in err  # the rule, stated in the message
    assert ".1'" not in err  # not pandas' renamed copy of a repeated column
    assert not (tmp_path / "s.json").exists()
    with pytest.raises(DataError, match="minute"):
        load_functions(str(f))


def test_minute_columns_in_another_order_are_still_read_by_their_number(tmp_path: Path) -> None:
    f = tmp_path / "fn.csv"
    f.write_text("HashFunction,HashOwner,HashApp,minute_2,minute_3,minute_1\nfa,o,a,20,30,10\n")
    assert load_functions(str(f)).counts.tolist() == [[10, 20, 30]]


# -- 4. a series CSV's step against the policy's demand.stepSeconds ----------------------------------


def _policy_at(tmp_path: Path, step: str) -> Path:
    text = EXAMPLE.read_text().replace("stepSeconds: 10 ", f"stepSeconds: {step} ")
    assert f"stepSeconds: {step} " in text
    p = tmp_path / f"p{step}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(("csv_step", "policy_step"), [(60, "10"), (10, "60"), (30, "10")])
def test_plan_refuses_a_history_at_another_step_than_the_policy(
    cli: Cli, tmp_path: Path, csv_step: int, policy_step: str
) -> None:
    trace = series_csv(tmp_path / "s.csv", n=3 * 1440, step=csv_step)
    pol = _policy_at(tmp_path, policy_step)
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(pol), "--history", str(trace), "--db", f"sqlite:///{db}")
    assert_refused(
        result,
        f"default/web has demand.stepSeconds {policy_step}",
        f"the history {trace} is at {csv_step} s steps",
        f"Set demand.stepSeconds: {csv_step} in the policy",
        f"give a history sampled every {policy_step} s",
    )
    assert not db.exists()


def test_plan_with_matching_steps_plans_at_that_step(cli: Cli, tmp_path: Path) -> None:
    n = 3 * 1440
    trace = series_csv(tmp_path / "s.csv", n=n, step=60)
    pol = _policy_at(tmp_path, "60")
    db = f"sqlite:///{tmp_path / 'a.db'}"
    code, out, err = cli("plan", "--policy", str(pol), "--history", str(trace), "--output", "json", "--db", db)
    assert code == 0, err
    doc = json.loads(out)
    (action,) = doc["actions"]
    assert action["target"] == "Deployment/default/web"
    end = datetime.fromtimestamp(T0 + n * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert doc["created_at"] == end  # planned just after the last 60 s sample


def test_a_step_within_one_percent_of_the_policy_is_the_same_step(cli: Cli, tmp_path: Path) -> None:
    # Timestamps a little irregular (a median spacing of 10.05 s) are still a 10 s series.
    trace = series_csv(tmp_path / "s.csv", n=3 * 1440, step=10.05)
    db = f"sqlite:///{tmp_path / 'a.db'}"
    code, out, err = cli("plan", "--policy", str(EXAMPLE), "--history", str(trace), "--output", "json", "--db", db)
    assert code == 0, err
    assert json.loads(out)["actions"]


def test_a_multi_policy_file_names_every_policy_whose_step_differs(cli: Cli, tmp_path: Path) -> None:
    at10 = EXAMPLE.read_text()
    at60 = at10.replace("stepSeconds: 10 ", "stepSeconds: 60 ").replace("  name: web\n", "  name: api\n")
    pol = tmp_path / "two.yaml"
    pol.write_text(at10 + "---\n" + at60)
    trace = series_csv(tmp_path / "s.csv", n=400, step=10)
    db = tmp_path / "a.db"
    err = assert_refused(
        cli("plan", "--policy", str(pol), "--history", str(trace), "--db", f"sqlite:///{db}"),
        "default/api has demand.stepSeconds 60",
    )
    assert "default/web" not in err
    assert not db.exists()


@pytest.mark.parametrize("command", ["run", "retrain"])
def test_run_and_retrain_refuse_a_trace_at_another_step_before_creating_their_database(
    cli: Cli, tmp_path: Path, command: str
) -> None:
    db = tmp_path / "a.db"
    trace = series_csv(tmp_path / "s.csv", n=3 * 1440, step=60)
    args = [command, "--policies", str(EXAMPLE), "--history", f"trace:{trace}", "--db", f"sqlite:///{db}"]
    if command == "run":
        args += ["--once", "--target", "memory", "--no-server"]
    assert_refused(cli(*args), "default/web has demand.stepSeconds 10", f"the history {trace} is at 60 s steps")
    assert not db.exists()


def test_a_timestamp_far_from_the_rest_is_refused_before_the_grid_is_made(cli: Cli, tmp_path: Path) -> None:
    trace = series_csv(tmp_path / "s.csv", n=3 * 1440, step=10)
    with trace.open("a") as f:
        f.write("253402214399,20\n")  # 9999-12-31: a 1.8 TiB grid at 10 s steps
    db = tmp_path / "a.db"
    result = cli("plan", "--policy", str(EXAMPLE), "--history", str(trace), "--db", f"sqlite:///{db}")
    assert_refused(result, "the largest gap is", "to 253402214399", "A timestamp out of place")
    assert not db.exists()
