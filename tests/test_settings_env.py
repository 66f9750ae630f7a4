"""Process settings from ``SCALEAHEAD_GROUP__FIELD`` variables: typos and bad values are clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scaleahead.errors import ConfigError
from scaleahead.settings import Settings


def test_variables_set_their_fields() -> None:
    s = Settings.from_env({"SCALEAHEAD_FORECAST__HORIZON_S": "600", "SCALEAHEAD_PROMETHEUS__USERNAME": "alice"})
    assert s.forecast.horizon_s == 600.0 and s.prometheus.username == "alice"


def test_a_bad_value_names_the_variable_and_what_it_should_be() -> None:
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_FORECAST__HORIZON_S='abc': Input should be a valid number"):
        Settings.from_env({"SCALEAHEAD_FORECAST__HORIZON_S": "abc"})


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("SCALEAHEAD_FORECAST__HORIZONS", "group 'forecast' has no field 'horizons'. Fields of forecast: horizon_s"),
        ("SCALEAHEAD_FORCAST__MODEL", "there is no settings group 'forcast'. Groups: loop, forecast"),
    ],
)
def test_a_misspelt_variable_is_an_error_not_silently_ignored(key: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Settings.from_env({key: "1"})


def test_variables_without_a_group_are_not_settings() -> None:
    assert Settings.from_env({"SCALEAHEAD_DB_URL": "sqlite://", "SCALEAHEAD_X": "1"}) == Settings()


def test_the_cli_says_what_is_wrong_in_one_line_with_exit_code_2() -> None:
    env = {"SCALEAHEAD_LOOP__INTERVAL_S": "-5", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "run", "--once", "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "SCALEAHEAD_LOOP__INTERVAL_S='-5': Input should be greater than 0" in proc.stderr


def test_the_capacity_to_share_comes_as_tenant_equals_replicas_or_json() -> None:
    s = Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": "shop=40, *=200"})
    assert s.loop.capacity == {"shop": 40, "*": 200}
    assert Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": '{"blog": 3}'}).loop.capacity == {"blog": 3}
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_LOOP__CAPACITY='shop': .*not TENANT=REPLICAS"):
        Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": "shop"})
    with pytest.raises(
        ConfigError, match=r"SCALEAHEAD_LOOP__CAPACITY\[shop\]=-1: Input should be greater than or equal to 0"
    ):
        Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": "shop=-1"})
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_LOOP__CAPACITY\[shop\]='many': Input should be a valid integer"):
        Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": "shop=many"})


@pytest.mark.parametrize("value", ["shop=40,*=200,shop=4", "shop=40, shop =40", '{"shop": 40, "*": 200, "shop": 4}'])
def test_a_tenant_named_twice_in_the_capacity_is_an_error_not_the_last_one(value: str) -> None:
    # Before, the last one silently won: shop=40,*=200,shop=4 gave shop 4 replicas.
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_LOOP__CAPACITY=.*tenant 'shop' is given twice \(40 and 4?0?\)"):
        Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": value})


@pytest.mark.parametrize("value", ['{"shop": true}', '{"shop": false, "*": 200}', '{"shop": 4.0}', '{"shop": "4"}'])
def test_a_capacity_is_a_json_whole_number_not_a_boolean_nor_text(value: str) -> None:
    # Before, true was taken as 1 replica and false as 0.
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_LOOP__CAPACITY\[shop\]=.*Input should be a valid integer"):
        Settings.from_env({"SCALEAHEAD_LOOP__CAPACITY": value})


def test_an_unknown_rollout_mode_for_retrained_models_is_refused_at_start() -> None:
    # checked when the setting is read, not after a retraining has trained and registered a model
    with pytest.raises(ConfigError, match="SCALEAHEAD_JOBS__ROLLOUT_MODE='Canary': Input should be 'shadow', 'canary'"):
        Settings.from_env({"SCALEAHEAD_JOBS__ROLLOUT_MODE": "Canary"})
    assert Settings.from_env({"SCALEAHEAD_JOBS__ROLLOUT_MODE": "canary"}).jobs.rollout_mode == "canary"


def test_a_group_variable_one_underscore_short_is_an_error_with_the_right_name() -> None:
    # Before, SCALEAHEAD_ACTUATION_DRY_RUN=true was ignored and the plan was applied.
    with pytest.raises(ConfigError, match=r"Did you mean SCALEAHEAD_ACTUATION__DRY_RUN\?"):
        Settings.from_env({"SCALEAHEAD_ACTUATION_DRY_RUN": "true"})


def test_kubernetes_service_link_variables_are_not_settings() -> None:
    # Kubernetes sets these in every pod of the namespace of the Service scaleahead-webhook.
    links = {
        "SCALEAHEAD_WEBHOOK_SERVICE_HOST": "10.96.0.12",
        "SCALEAHEAD_WEBHOOK_SERVICE_PORT": "443",
        "SCALEAHEAD_WEBHOOK_SERVICE_PORT_HTTPS": "443",
        "SCALEAHEAD_WEBHOOK_PORT": "tcp://10.96.0.12:443",
        "SCALEAHEAD_WEBHOOK_PORT_443_TCP": "tcp://10.96.0.12:443",
        "SCALEAHEAD_WEBHOOK_PORT_443_TCP_PROTO": "tcp",
        "SCALEAHEAD_WEBHOOK_PORT_443_TCP_PORT": "443",
        "SCALEAHEAD_WEBHOOK_PORT_443_TCP_ADDR": "10.96.0.12",
        "SCALEAHEAD_SERVER_SERVICE_HOST": "fd00::12",
        "SCALEAHEAD_SERVER_PORT": "tcp://[fd00::12]:8080",
    }
    assert Settings.from_env(links) == Settings()


@pytest.mark.parametrize(
    ("key", "value", "meant"),
    [
        ("SCALEAHEAD_SERVER_PORT", "9090", "SCALEAHEAD_SERVER__PORT"),
        ("SCALEAHEAD_WEBHOOK_PORT", "9443", "SCALEAHEAD_WEBHOOK__PORT"),
    ],
)
def test_a_port_setting_one_underscore_short_is_an_error_though_its_name_is_a_service_links(
    key: str, value: str, meant: str
) -> None:
    # Before, any *_PORT variable was taken for a Kubernetes service link and silently ignored, so
    # SCALEAHEAD_SERVER_PORT=9090 left the endpoint on 8080; a service link's value is tcp://IP:PORT.
    with pytest.raises(ConfigError, match=rf"Unknown setting {key}:.*not the value of one.*Did you mean {meant}\?"):
        Settings.from_env({key: value})


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_no_setting_may_be_infinite_or_nan(value: str) -> None:
    with pytest.raises(ConfigError, match="SCALEAHEAD_LOOP__INTERVAL_S=.*finite number"):
        Settings.from_env({"SCALEAHEAD_LOOP__INTERVAL_S": value})


def test_a_bad_cron_expression_is_refused_with_the_settings() -> None:
    with pytest.raises(ConfigError, match=r"SCALEAHEAD_JOBS__PRUNE_CRON='every night'.*not a cron expression"):
        Settings.from_env({"SCALEAHEAD_JOBS__PRUNE_CRON": "every night"})
    assert Settings.from_env({"SCALEAHEAD_JOBS__PRUNE_CRON": "*/20 * * * *"}).jobs.prune_cron == "*/20 * * * *"


def test_a_single_underscore_typo_stops_a_command_that_reads_no_setting() -> None:
    env = {"SCALEAHEAD_ACTUATION_PAUSED": "true", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "scaleahead.cli", "version"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "SCALEAHEAD_ACTUATION__PAUSED" in proc.stderr


def test_release_of_removed_policies_can_be_turned_off_from_the_environment() -> None:
    from scaleahead.settings import Settings

    assert Settings().actuation.release_removed_after_s == 600.0
    for word in ("never", "NULL", "none"):
        env = {"SCALEAHEAD_ACTUATION__RELEASE_REMOVED_AFTER_S": word}
        assert Settings.from_env(env).actuation.release_removed_after_s is None
    assert (
        Settings.from_env({"SCALEAHEAD_ACTUATION__RELEASE_REMOVED_AFTER_S": "120"}).actuation.release_removed_after_s
        == 120
    )
    with pytest.raises(ConfigError, match="RELEASE_REMOVED_AFTER_S='soon'"):
        Settings.from_env({"SCALEAHEAD_ACTUATION__RELEASE_REMOVED_AFTER_S": "soon"})


def test_plan_capacity_naming_a_tenant_twice_is_an_error() -> None:
    from scaleahead.cli import parse_capacity
    from scaleahead.errors import UserError

    assert parse_capacity(["shop=40", "*=200"]) == {"shop": 40, "*": 200}
    # entries joined by ',' as loop.capacity takes them, too (the docs said so; it was refused)
    assert parse_capacity(["default=3,api=4", "*=9"]) == {"default": 3, "api": 4, "*": 9}
    with pytest.raises(UserError, match=r"--capacity 'bad tenant=3' does not name a tenant"):
        parse_capacity(["bad tenant=3"])  # was accepted, and limited nothing
    with pytest.raises(UserError, match=r"--capacity '' is not TENANT=REPLICAS"):
        parse_capacity([""])
    with pytest.raises(UserError, match=r"--capacity names tenant 'api' twice"):
        parse_capacity(["api=1,api=2"])
    with pytest.raises(UserError, match=r"--capacity names tenant 'shop' twice \(40 and 4\)"):
        parse_capacity(["shop=40", "*=200", "shop=4"])


@pytest.mark.parametrize("field", ["MODEL", "FALLBACK_MODEL"])
def test_an_unknown_model_in_the_settings_names_the_variable_and_the_known_models(field: str) -> None:
    from forecaster.registry import available_models

    with pytest.raises(ConfigError) as info:
        Settings.from_env({f"SCALEAHEAD_FORECAST__{field}": "bogus"}, known_models=available_models())
    assert f"SCALEAHEAD_FORECAST__{field}='bogus'" in info.value.message
    assert "Known models: calibrated_naive" in info.value.message and "seasonal_naive" in info.value.message
    # the names are the composition root's to give (settings import no adapter): none given, none checked
    assert Settings.from_env({f"SCALEAHEAD_FORECAST__{field}": "bogus"}).forecast.model in ("bogus", "lstm")


def test_a_model_registered_later_is_a_known_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from forecaster import registry
    from forecaster.baselines import Naive

    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    registry.register("my_model", Naive)
    env = {"SCALEAHEAD_FORECAST__FALLBACK_MODEL": "my_model"}
    assert Settings.from_env(env, known_models=registry.available_models()).forecast.fallback_model == "my_model"


def test_run_with_an_unknown_fallback_model_is_refused_before_the_database_is_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    from pathlib import Path

    db = tmp_path / "a.db"
    example = Path(__file__).resolve().parents[1] / "examples" / "policy.yaml"
    r = subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "run", "--once", "--model", "lstm", "--policies", str(example)]
        + ["--history", "trace:nasa-10s", "--target", "memory", "--virtual", "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SCALEAHEAD_FORECAST__FALLBACK_MODEL": "bogus"},
    )
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, err  # was "Unknown model 'bogus'." after the database was migrated
    assert "SCALEAHEAD_FORECAST__FALLBACK_MODEL='bogus'" in err and "Known models:" in err
    assert not db.exists()
