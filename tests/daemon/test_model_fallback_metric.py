"""``scaleahead_model_fallback``: a fallback baseline is told apart from a baseline configured on
purpose (the rollout audit of 2026-12-06: both exported only
``scaleahead_model_info{model="seasonal_naive",version="unregistered"}``)."""

from __future__ import annotations

from pathlib import Path

from forecaster import make_model
from scaleahead.commands.run import _production_model
from scaleahead.observability import Metrics
from scaleahead.settings import Settings
from scaleahead.types import Series
from storage import Store
from tests.daemon.conftest import DAY


def _fallback_series(metrics: Metrics) -> dict[tuple[str, str], float]:
    out = {}
    for family in metrics.registry.collect():
        if family.name == "scaleahead_model_fallback":
            for sample in family.samples:
                out[(sample.labels["configured"], sample.labels["reason"])] = sample.value
    return out


def _start(name: str, store: Store, history: list[Series]) -> tuple[Metrics, int | None]:
    settings = Settings()
    settings.forecast.fallback_model = "seasonal_naive"
    fell: list[str] = []
    model, version = _production_model(name, store, settings, history, [], fell)
    metrics = Metrics()
    metrics.set_model(model.name, version)
    metrics.set_fallback(name, fell[0] if fell else None)
    assert model.name == ("seasonal_naive" if fell or name == "seasonal_naive" else name)
    return metrics, version


def test_the_fallback_is_exported_with_why_and_a_configured_baseline_is_not(nasa: Series, tmp_path: Path) -> None:
    history = [nasa.between(nasa.start, nasa.start + DAY)]
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    # nothing trained yet (the default forecast.model is lstm: a fresh install)
    metrics, _ = _start("lstm", store, history)
    assert _fallback_series(metrics) == {("lstm", "no_model"): 1.0}
    # a baseline configured on purpose: the same model_info, but no fallback
    metrics, _ = _start("seasonal_naive", store, history)
    assert _fallback_series(metrics) == {}
    assert (
        metrics.registry.get_sample_value(
            "scaleahead_model_info", {"model": "seasonal_naive", "version": "unregistered"}
        )
        == 1.0
    )
    # a champion whose checkpoint is damaged
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    store.register_model("lstm-bad", "lstm", artifact_path=str(bad), status="champion")
    metrics, version = _start("lstm", store, history)
    assert version is None and _fallback_series(metrics) == {("lstm", "unloadable"): 1.0}
    # a registered version in production clears it
    metrics.set_model("seasonal_naive", 7)
    metrics.set_fallback("lstm", None)
    assert _fallback_series(metrics) == {}
    store.close()


def test_the_daemon_clears_the_fallback_when_a_registered_version_goes_to_production(daemon_factory, nasa) -> None:  # type: ignore[no-untyped-def]
    daemon, clock, _, store = daemon_factory()
    daemon.metrics.set_fallback("lstm", "no_model")  # as `run` sets it at start
    model = make_model("seasonal_naive").fit([nasa.between(nasa.start, nasa.start + DAY)])
    mid = store.register_model("sn", "seasonal_naive", status="champion")
    daemon._to_production(model, mid, 0.3)
    assert _fallback_series(daemon.metrics) == {}
    assert (
        daemon.metrics.registry.get_sample_value(
            "scaleahead_model_info", {"model": "seasonal_naive", "version": str(mid)}
        )
        == 1.0
    )
    daemon.shutdown()


class _Sink:
    def __init__(self) -> None:
        self.published: list = []  # type: ignore[type-arg]

    def publish(self, statuses) -> None:  # type: ignore[no-untyped-def]
        self.published.append(list(statuses))


def test_a_status_names_the_challenger_for_a_workload_on_its_arm(daemon_factory, nasa) -> None:  # type: ignore[no-untyped-def]
    """Until 2026-12-06 a policy's status named production's model for every workload, also for
    those a canary's challenger forecast for (found by the rollout audit)."""
    from dataclasses import replace

    from actuator.rollouts import RolloutView

    sink = _Sink()
    daemon, clock, _, store = daemon_factory(n=3, status_sink=sink)
    challenger = make_model("window_mean").fit([nasa.between(nasa.start, nasa.start + 3 * DAY)])
    version = store.register_model("wm", "window_mean", status="challenger")
    everyone = RolloutView("canary", 1.0, "salt", None, challenger_version=version)
    daemon.deps = replace(daemon.deps, rollout=everyone, challenger=challenger)
    daemon.follow_rollout = lambda now: None  # the rollout is given here, not read from the store
    daemon.tick(clock.now())
    (statuses,) = sink.published
    assert statuses and {s.model for s in statuses} == {f"window_mean (challenger, version {version})"}
    # nobody on the challenger's arm: production's name, as before
    daemon.deps = replace(daemon.deps, rollout=replace(everyone, share=0.0))
    clock.sleep(10.0)
    daemon.tick(clock.now())
    assert {s.model for s in sink.published[-1]} == {daemon.deps.forecaster.name}
    daemon.shutdown()


def test_a_champion_registered_later_that_cannot_be_loaded_turns_the_fallback_reason_to_unloadable(  # type: ignore[no-untyped-def]
    daemon_factory, tmp_path: Path
) -> None:
    """Started on the fallback with nothing registered (``no_model``); the first champion then
    registered cannot be loaded: the reason becomes ``unloadable`` (found by a review on 2026-12-06:
    it stayed ``no_model`` and ScaleaheadModelUnloadable never fired)."""
    daemon, clock, _, store = daemon_factory()
    daemon.settings.forecast.model = "lstm"
    daemon.metrics.set_fallback("lstm", "no_model")  # as `run` sets it at start
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    store.register_model("lstm-bad", "lstm", artifact_path=str(bad), status="champion")
    daemon.follow_champion(clock.now())
    assert _fallback_series(daemon.metrics) == {("lstm", "unloadable"): 1.0}
    daemon.shutdown()
