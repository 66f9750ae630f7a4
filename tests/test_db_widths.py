"""Values stored in a text column are checked against its width before any work or write.

SQLite keeps a longer text than a ``VARCHAR(n)`` says; PostgreSQL refuses the write. Before, a
policy's 129-character ``rolloutGroup`` made every retraining on PostgreSQL register its model and
then fail at the rollout (the model left a challenger without one, again at every retraining);
``rollout start --group <129 characters>`` printed a sqlalchemy traceback; and ``train`` on a CSV
with a long path trained for minutes before the registry refused it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaleahead.commands import db_width
from scaleahead.crd import crd
from scaleahead.errors import ConfigError
from scaleahead.policy import MAX_ROLLOUT_GROUP, parse_policies
from storage import Store
from tests.conftest import Cli
from tests.test_cli_bad_input import assert_refused, series_csv

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "policy.yaml"


def _with_group(group: str) -> str:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["rolloutGroup"] = group
    return yaml.safe_dump(doc)


def test_a_rollout_group_longer_than_its_column_is_refused_by_the_policy_and_the_crd() -> None:
    assert MAX_ROLLOUT_GROUP == db_width("RolloutRow", "group") == 128
    (policy,) = parse_policies(_with_group("g" * 128), "p.yaml")
    assert policy.spec.rollout_group == "g" * 128
    with pytest.raises(ConfigError, match=r"p.yaml:\d+: field 'spec.rolloutGroup': String should have at most 128"):
        parse_policies(_with_group("team-payments-" + "x" * 150), "p.yaml")
    spec = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["rolloutGroup"]["maxLength"] == 128


@pytest.mark.parametrize(
    ("option", "value", "column"),
    [
        ("--group", "g" * 129, ("RolloutRow", "group")),
        ("--challenger", "c" * 257, ("RolloutRow", "challenger")),
        ("--champion", "p" * 257, ("RolloutRow", "champion")),
    ],
)
def test_rollout_start_refuses_a_value_longer_than_its_column_before_opening_the_database(
    cli: Cli, tmp_path: Path, option: str, value: str, column: tuple[str, str]
) -> None:
    width = db_width(*column)
    assert len(value) == width + 1
    argv = ["rollout", "start", "--challenger", "p2", "--mode", "shadow", "--db", f"sqlite:///{tmp_path / 'r.db'}"]
    if option == "--challenger":
        argv[3] = value
    else:
        argv += [option, value]
    assert_refused(cli(*argv), f"{option} is {width + 1} characters", f"the database keeps at most {width}")
    assert not (tmp_path / "r.db").exists()


def test_a_database_refusing_a_value_is_one_paragraph_not_a_traceback(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import DataError, IntegrityError

    from actuator.rollouts import RolloutBook

    for exc in (
        DataError("INSERT INTO rollouts", {}, Exception("value too long for type character varying(128)")),
        IntegrityError("INSERT INTO rollouts", {}, Exception("duplicate key value violates unique constraint")),
    ):

        def start(*_: Any, exc: Exception = exc, **__: Any) -> int:
            raise exc

        monkeypatch.setattr(RolloutBook, "start", start)
        out = cli(
            "rollout", "start", "--challenger", "p2", "--mode", "shadow", "--db", f"sqlite:///{tmp_path / 'r.db'}"
        )
        assert_refused(out, "the database refused the write", str(exc.orig))


@dataclasses.dataclass
class _Report:
    val_loss: float = 0.5
    epochs: int = 1
    train_s: float = 0.1


def test_train_checks_the_registrys_columns_before_training(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forecaster.lstm import LSTMForecaster

    trained: list[int] = []

    def fit(self: Any, data: Any) -> Any:
        trained.append(len(data))
        self.report = _Report()
        return self

    def save(self: Any, path: Path) -> Path:
        path.write_bytes(b"checkpoint")
        return path

    monkeypatch.setattr(LSTMForecaster, "fit", fit)
    monkeypatch.setattr(LSTMForecaster, "save", save)
    db = f"sqlite:///{tmp_path / 'm.db'}"
    # a path longer than model_versions.data_source: refused before training
    deep = tmp_path / ("d" * 200) / ("e" * 200) / ("f" * 100)
    deep.mkdir(parents=True)
    long_path = series_csv(deep / "t.csv")
    width = db_width("ModelVersionRow", "data_source")
    assert len(str(long_path)) > width
    out = cli("train", "--trace", str(long_path), "--db", db, "--out", str(tmp_path / "models"))
    assert_refused(out, "--trace is", f"the database keeps at most {width}", "nothing was trained")
    assert trained == []
    # a long file name: the model's name is cut to fit model_versions.name (and the checkpoint's file name)
    long_name = series_csv(tmp_path / ("n" * 200 + ".csv"))
    out = cli("train", "--trace", str(long_name), "--db", db, "--out", str(tmp_path / "models"))
    assert out[0] == 0, out[2]
    assert trained == [1]
    (model,) = Store(db).models()
    assert model.name.startswith("lstm-nnnn") and len(model.name) == db_width("ModelVersionRow", "name")
