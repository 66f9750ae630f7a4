"""Retraining: fit a new model on recent history and enter it as a rollout challenger.

A retrained model never goes straight into production. It is registered in the model registry
with status ``challenger`` and the error it and the current champion score on the same held-out
tail of the history, and a rollout (``Store.create_rollout``, mode from settings) is opened per
rollout group; the rollout machinery (``scaleahead rollout ...``) promotes or aborts it. Used by
the daemon's schedule and drift trigger and by ``scaleahead retrain`` (the CronJob).
"""

from __future__ import annotations

import hashlib
import logging
import math
import tempfile
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.exc import SQLAlchemyError

from actuator.rollouts import RolloutBook
from forecaster import make_model
from forecaster.base import Forecaster, common_cut, horizon_steps_for
from forecaster.registry import LEARNED, available_models
from scaleahead.errors import DataError
from scaleahead.policy import Policy
from scaleahead.settings import Settings
from scaleahead.types import Series, WorkloadRef
from storage import Store

log = logging.getLogger("scaleahead.retraining")

#: Share of each series held out to compare challenger and champion.
HOLDOUT_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class RetrainResult:
    model_version_id: int
    family: str
    rollout_ids: tuple[int, ...]
    metrics: dict[str, Any] = field(default_factory=dict)
    artifact_path: str = ""
    #: The fitted challenger, so the daemon can plan with it in its rollout (shadow plans) and
    #: switch to it once the rollout is promoted.
    model: Forecaster | None = None


def holdout_wape(model: Forecaster, series: Sequence[Series], horizon_s: float, share: float = HOLDOUT_SHARE) -> float:
    """WAPE of the median over origins in the last ``share`` of each series (NaN if none scored).

    A series whose held-out tail is shorter than the horizon, or that has no observed value before
    it (its history starts inside the tail: a new workload), is not scored."""
    abs_err = 0.0
    total = 0.0
    for s, lo in zip(series, _holdout_starts(series, share), strict=True):
        h = horizon_steps_for(s.step_s, horizon_s)
        n = len(s)
        if n - h <= lo or not np.isfinite(s.values[:lo]).any():
            continue  # too short, or nothing observed before its holdout to forecast from (a new workload)
        origins = np.arange(lo, n - h + 1, max(1, h // 3), dtype=np.int64)
        pred = model.predict_origins(s, origins, h)[0.5]
        actual = np.stack([s.values[o : o + h] for o in origins])
        ok = np.isfinite(actual)
        abs_err += float(np.abs(pred[ok] - actual[ok]).sum())
        total += float(np.abs(actual[ok]).sum())
    return abs_err / total if total > 0 else float("nan")


#: How a refused retraining ends its message.
NOT_REGISTERED = "Nothing was registered and the running rollout is unchanged."


def _check_scorable(series: Sequence[Series], starts: Sequence[int], horizon_s: float) -> None:
    """A ``DataError`` unless some series' held-out tail holds a whole forecast horizon after some
    history (``series`` start at their first observed value: a start of 0 is a series that begins
    inside the tail): a model whose holdout cannot be scored has nothing to be compared with the
    champion on."""
    for s, lo in zip(series, starts, strict=True):
        if lo > 0 and len(s) - horizon_steps_for(s.step_s, horizon_s) > lo:
            return
    longest = max(series, key=lambda s: len(s) * s.step_s)
    h = horizon_steps_for(longest.step_s, horizon_s)
    need = math.floor(h / HOLDOUT_SHARE) + 1
    raise DataError(
        f"Too little history to score a retrained model: the longest series ({longest.name}) has "
        f"{len(longest)} point(s) at {longest.step_s:g} s steps from its first value on, and its held-out "
        f"last {HOLDOUT_SHARE:.0%} must be longer than the forecast horizon ({h} steps, "
        f"forecast.horizon_s {horizon_s:g}): at least {need} points are needed. {NOT_REGISTERED}",
        "Retrain when more history has been collected (a longer history window or trace).",
    )


def _usable(
    history: Mapping[WorkloadRef, Series], now: float
) -> tuple[list[WorkloadRef], list[Series], list[dict[str, str]]]:
    """The workloads with history before ``now`` to retrain on, each series from its first observed
    value on, and the others as ``left_out`` entries (``no_data``)."""
    refs: list[WorkloadRef] = []
    cut: list[Series] = []
    left_out: list[dict[str, str]] = []
    for ref, whole in history.items():
        s = whole.known_by(now)  # the steps ended by now
        if len(s) == 0 or np.isfinite(s.values).sum() < 2:
            left_out.append(
                {"workload": ref.key, "reason": "no_data", "detail": "fewer than 2 observed values in the window."}
            )
            continue
        # A window that starts with missing data (a new workload, a metric added later) is split
        # into fit and holdout over the part that has data, not over the window.
        first = int(np.flatnonzero(np.isfinite(s.values))[0])
        refs.append(ref)
        cut.append(s.between(s.start + first * s.step_s, s.end))
    return refs, cut, left_out


def _no_history() -> DataError:
    """``retrain``'s error when no workload has usable history."""
    return DataError("No workload has history to retrain on.", "Check the demand queries and the history window.")


def check_history_to_retrain(history: Mapping[WorkloadRef, Series], now: float, horizon_s: float) -> None:
    """The ``DataError`` ``retrain`` would raise for history too short to fit on or to score (none:
    go on), without a store: ``scaleahead retrain`` asks before it opens (or creates) the database."""
    _, cut, _ = _usable(history, now)
    if not cut:
        raise _no_history()
    _check_scorable(cut, _holdout_starts(cut, HOLDOUT_SHARE), horizon_s)


def _holdout_starts(series: Sequence[Series], share: float) -> list[int]:
    """Per series, where the held-out tail starts: one time cut for the series of each resolution."""
    starts = [0] * len(series)
    for step in {s.step_s for s in series}:
        ks = [k for k, s in enumerate(series) if s.step_s == step]
        for k, i in zip(ks, common_cut([series[k] for k in ks], share), strict=True):
            starts[k] = i
    return starts


def load_model_version(
    store: Store,
    model_id: int,
    step_s: float,
    history: Sequence[Series],
    horizon_s: float | None = None,
    now: float | None = None,
) -> Forecaster:
    """The forecaster of a registered model version: a learned one (``LEARNED``) from the checkpoint stored with it
    (or its file), a baseline family fitted on ``history``. A ``DataError`` says why it cannot, also when a
    learned one forecasts fewer steps than ``horizon_s`` (``forecast.horizon_s``) asks for at ``step_s``: every
    forecast would fail, so the caller falls back as for a missing checkpoint; and, given ``now``, when a
    learned one was trained on data after it (``trained_after``): its forecasts would read the future."""
    m = store.model(model_id)
    if m.family in LEARNED and now is not None and (late := trained_after(m.data_end, now, step_s)):
        raise DataError(
            f"Model version {model_id} was trained on data up to {late}: forecasting with it "
            "would read the period it is asked about (trained with --whole on the trace a virtual run replays, "
            "or a clock behind the data's).",
            "Train and promote a version on history before the run's start (scaleahead train without --whole), "
            "or start the run after its data.",
        )
    if m.family in LEARNED:
        from forecaster.lstm import CheckpointError, LSTMForecaster

        data = store.model_artifact(model_id)
        with tempfile.TemporaryDirectory(prefix="scaleahead-model-") as tmp:
            path = Path(tmp) / "model.ckpt"
            if data is not None:
                path.write_bytes(data)
            elif m.artifact_path and Path(m.artifact_path).is_file():
                path = Path(m.artifact_path)
                if m.artifact_sha256 and hashlib.sha256(path.read_bytes()).hexdigest() != m.artifact_sha256:
                    raise DataError(
                        f"Model version {model_id}: its checkpoint file {path} does not match the SHA-256 recorded "
                        "at training (changed or damaged since).",
                        "Restore the file, or retrain and promote the new version.",
                    )
            else:
                raise DataError(
                    f"Model version {model_id} has no checkpoint{m.pruned_note}.", "Retrain or register it with one."
                )
            try:
                learned = LSTMForecaster.load(path, step_s=step_s)
            except CheckpointError as exc:
                msg = exc.message
                if data is not None:  # not the temporary copy's path: where the checkpoint is kept
                    msg = msg.replace(str(path), "stored in the database")
                raise DataError(f"Model version {model_id}: {msg}", "Retrain it.") from exc
            if learned.spec is not None and horizon_s is not None:
                need = horizon_steps_for(step_s, horizon_s)
                if learned.spec.horizon_steps < need:
                    raise DataError(
                        f"Model version {model_id} forecasts {learned.spec.horizon_steps} steps "
                        f"({learned.spec.horizon_s:g} s); forecast.horizon_s {horizon_s:g} needs {need}.",
                        "Retrain it with the current forecast.horizon_s (scaleahead retrain), or lower the setting.",
                    )
            return learned
    if m.family not in available_models():
        raise DataError(f"Model version {model_id} is of an unknown family {m.family!r}.", "Retrain it.")
    if not history:
        raise DataError(f"No history to fit model version {model_id} ({m.family}) on.", "Wait for history.")
    return make_model(m.family).fit(list(history))


def trained_after(data_end: float | None, now: float, step_s: float) -> str:
    """``"TIME, after now (TIME)"`` when a model's training data ends after ``now`` by more than one
    step ``step_s`` (the newest step a loop reads may end at now), else ``""``. No peeking: a
    forecast made at ``now`` may use only data from before it, and a network trained on what comes
    after has seen it (no-peeking audit: ``run --virtual`` planned with a version trained on the
    whole trace it replayed, and nothing said so)."""
    if data_end is None or not math.isfinite(data_end) or data_end <= now + step_s:
        return ""

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return f"{iso(data_end)}, after now ({iso(now)})"


def retrained_family(settings: Settings) -> str:
    """The family a retraining fits: ``forecast.model``, or its fallback when this build lacks it."""
    family = settings.forecast.model
    return family if family in available_models() else settings.forecast.fallback_model


def writes_checkpoint(family: str) -> bool:
    """Whether a fitted ``family`` is saved as a checkpoint file (a learned one; a baseline is
    refitted on history when loaded, and writes nothing to ``--artifacts``)."""
    return callable(getattr(make_model(family), "save", None))


def _new_model(family: str, horizon_s: float) -> Forecaster:
    """An untrained ``family`` that forecasts ``horizon_s`` (``forecast.horizon_s``): a learned
    family's configured horizon (900 s by default) is set to it, else a longer setting would make
    every forecast (and the holdout score) of the retrained model fail. Baselines forecast any horizon."""
    model = make_model(family)
    if family in LEARNED:
        from forecaster.lstm import LSTMForecaster

        if isinstance(model, LSTMForecaster):
            model.config = replace(model.config, horizon_s=float(horizon_s))
    return model


def _hyperparams(model: Forecaster, horizon_s: float) -> dict[str, Any]:
    """What the registered model was trained with: a learned model's whole configuration (as
    ``scaleahead train`` records it), else the horizon it was scored at."""
    config = getattr(model, "config", None)
    if is_dataclass(config) and not isinstance(config, type):
        return asdict(config)
    return {"horizon_s": horizon_s}


def clock_hint(series: Sequence[Series], remedy: str = "forecast.model lstm_clock") -> str:
    """A sentence when some of ``series`` rise on 5-minute marks far more often than by chance
    (``forecaster.features.clock_rises``): the ``lstm_clock`` model's case. Empty otherwise."""
    from forecaster.features import clock_rises
    from forecaster.registry import CLOCK_PERIOD_S

    found = [(s.name, clock_rises(s.values, s.start, s.step_s, CLOCK_PERIOD_S)) for s in series]
    hits = [(name, c) for name, c in found if c.suggests_clock()]
    if not hits:
        return ""
    listed = ", ".join(f"{name} ({c.on_mark} of {c.rises}, {c.lift:.1f}x chance)" for name, c in hits[:5])
    more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
    return (
        f"{len(hits)} of {len(found)} series start their sudden rises (above x1.2 in one step) on 5-minute marks "
        f"far more often than by chance: {listed}{more}. {remedy} gives the LSTM that phase "
        '(docs/forecaster.md, "Clock phase").'
    )


def read_problems(source: object) -> dict[str, Any]:
    """``retrain``'s ``history_errors`` and ``no_data`` from a history source's last read: its
    per-workload ``errors`` and, among them, the ``empty`` ones (``PrometheusHistory``)."""
    return {
        "history_errors": dict(getattr(source, "errors", None) or {}),
        "no_data": set(getattr(source, "empty", None) or ()),
    }


def _not_scored(
    refs: Sequence[WorkloadRef], series: Sequence[Series], starts: Sequence[int], horizon_s: float
) -> list[dict[str, str]]:
    """The fitted series ``holdout_wape`` leaves out, each with why (``series`` start at their
    first observed value)."""
    out = []
    for ref, s, lo in zip(refs, series, starts, strict=True):
        if lo == 0:
            why = (
                f"its history starts inside the held-out last {HOLDOUT_SHARE:.0%} of the window (a new "
                "workload): nothing observed before it to forecast from; fitted on, not scored."
            )
        elif not np.isfinite(s.values[lo:]).any():
            why = "no demand observed in its held-out tail (it stopped reporting); fitted on, not scored."
        elif len(s) - horizon_steps_for(s.step_s, horizon_s) <= lo:
            why = "its held-out tail is shorter than the forecast horizon; fitted on, not scored."
        else:
            continue
        out.append({"workload": ref.key, "reason": "not_scored", "detail": why})
    return out


def _log_left_out(entry: Mapping[str, str]) -> None:
    level = logging.WARNING if entry["reason"] == "history_failed" else logging.INFO
    log.log(
        level,
        "retraining leaves out %s (%s): %s",
        entry["workload"],
        entry["reason"],
        entry["detail"],
        extra={"event": "retrain_left_out", **entry},
    )


def _remove_checkpoint(path: str) -> str:
    """Delete a checkpoint file no version names; a sentence saying so (empty without a file)."""
    if not path:
        return ""
    try:
        Path(path).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not delete the unregistered checkpoint file %s: %s; delete it by hand", path, exc)
        return f"Its checkpoint file {path} could not be deleted ({exc.strerror or exc}): delete it by hand. "
    log.warning("deleted the checkpoint file %s of the model that could not be registered", path)
    return f"Its checkpoint file {path} was deleted. "


def retrain(
    policies: Sequence[Policy],
    history: Mapping[WorkloadRef, Series],
    store: Store,
    settings: Settings,
    now: float,
    champion: Forecaster | None = None,
    champion_label: str = "",
    trigger: str = "schedule",
    artifact_dir: Path | None = None,
    history_errors: Mapping[WorkloadRef, str] | None = None,
    no_data: Collection[WorkloadRef] = (),
    allow_failed_reads: bool | None = None,
    still_leading: Callable[[], bool] | None = None,
) -> RetrainResult:
    """Fit ``settings.forecast.model`` on history before ``now``; register it as a challenger.

    ``history_errors`` are the workloads whose history read failed (``PrometheusHistory.errors``;
    ``read_problems`` gives both arguments from a history source), except those in ``no_data``,
    whose query answered with no data at all. A failed read refuses the retraining unless
    ``allow_failed_reads`` (default ``settings.jobs.retrain_allow_failed_reads``): a model fitted
    on the workloads that happened to be read would supersede the running retrained rollout. The
    workloads left out (``history_failed``, ``no_data``) or fitted on but left out of the holdout
    score (``not_scored``: a workload newer than the holdout, one with no demand observed in it)
    are listed in ``metrics["left_out"]`` and logged (event ``retrain_left_out``).

    ``still_leading`` (the daemon's job) is asked after the fit, just before anything is registered:
    False (this replica lost the leader Lease during the fit, or is shutting down and gave it up)
    drops the fitted model: nothing is registered and no rollout is touched.

    Raises:
        DataError: a history read failed (and that is not allowed), no workload has enough history
            to fit on, or to score the fitted model on its holdout, the database refused the
            registration, or ``still_leading`` said no (then nothing is registered and no rollout
            is touched).
    """
    family = retrained_family(settings)
    note = ""
    if family != settings.forecast.model:
        note = f"model {settings.forecast.model!r} is not available in this build; trained {family!r}"
    allow = settings.jobs.retrain_allow_failed_reads if allow_failed_reads is None else allow_failed_reads
    empty = set(no_data)
    failed = {ref: msg for ref, msg in (history_errors or {}).items() if ref not in empty}
    if failed and not allow:
        listed = "; ".join(
            (m if str(ref) in m else f"{ref}: {m}")
            for ref, m in ((r, x.rstrip(". ")) for r, x in list(failed.items())[:5])
        )
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        raise DataError(
            f"The history of {len(failed)} workload(s) could not be read, so a retraining now would fit on "
            f"only part of the workloads: {listed}{more}. {NOT_REGISTERED}",
            "Fix what the error says (Prometheus down or overloaded, a wrong query) and retrain again; to "
            "retrain on the workloads that were read, pass --allow-failed-reads (scaleahead retrain) or set "
            "SCALEAHEAD_JOBS__RETRAIN_ALLOW_FAILED_READS=true (jobs.retrain_allow_failed_reads, the daemon's job).",
        )
    left_out: list[dict[str, str]] = [
        {"workload": ref.key, "reason": "history_failed", "detail": msg} for ref, msg in failed.items()
    ]
    wanted = list(dict.fromkeys(p.workload for p in policies))
    for ref in wanted:
        if ref not in history and ref not in failed:
            detail = (history_errors or {}).get(ref) or "the history source returned no data for it."
            left_out.append({"workload": ref.key, "reason": "no_data", "detail": detail})
    refs, cut, unusable = _usable(history, now)
    left_out += unusable
    if not cut:
        for entry in left_out:
            _log_left_out(entry)
        raise _no_history()
    # One time cut for all: a newer, shorter series' fit part must not overlap a longer one's holdout.
    starts = _holdout_starts(cut, HOLDOUT_SHARE)
    left_out += _not_scored(refs, cut, starts, settings.forecast.horizon_s)
    for entry in left_out:
        _log_left_out(entry)
    _check_scorable(cut, starts, settings.forecast.horizon_s)
    fit_parts = [Series(s.name, s.start, s.step_s, s.values[:i], s.unit) for s, i in zip(cut, starts, strict=True)]
    fit_parts = [s for s in fit_parts if len(s) > 0]
    model = _new_model(family, settings.forecast.horizon_s)
    model.fit(fit_parts)
    wape_new = holdout_wape(model, cut, settings.forecast.horizon_s)
    if math.isnan(wape_new):
        # A challenger that cannot be compared with anything must not replace a running rollout.
        raise DataError(
            "The retrained model cannot be scored: the held-out last "
            f"{HOLDOUT_SHARE:.0%} of every workload's history has no demand above zero. {NOT_REGISTERED}",
            "Retrain once the workloads have served traffic (check the demand queries).",
        )
    scored = champion
    if champion is not None and champion.name not in LEARNED and champion.name in available_models():
        # A fitted family (a baseline) is scored as the challenger is: fitted on the fit part only.
        # The one in production was fitted on history that covers the holdout (an in-sample score).
        scored = make_model(champion.name).fit(fit_parts)
    wape_old = holdout_wape(scored, cut, settings.forecast.horizon_s) if scored is not None else float("nan")
    # The registered model is refitted on everything (the holdout only scored it).
    model = _new_model(family, settings.forecast.horizon_s).fit(cut)
    metrics: dict[str, Any] = {
        "holdout_wape": None if math.isnan(wape_new) else round(wape_new, 6),
        "champion_holdout_wape": None if math.isnan(wape_old) else round(wape_old, 6),
        "series": len(cut),
        "scored_series": len(cut) - sum(e["reason"] == "not_scored" for e in left_out),
        "left_out": left_out,
        "trigger": trigger,
    }
    if note:
        metrics["note"] = note
    if family == "lstm":
        hint = clock_hint(cut)
        if hint:
            metrics["clock_hint"] = hint
    artifact_path, sha, artifact = "", "", None
    save = getattr(model, "save", None)
    if callable(save):
        # The checkpoint goes into the database with the version (any replica, any restart can load
        # it); with ``artifact_dir`` a copy stays there too.
        with tempfile.TemporaryDirectory(prefix="scaleahead-retrain-") as tmp:
            # A random suffix: two retrainings at the same ``now`` (a re-run ``retrain --artifacts``, a
            # re-run virtual daemon) would otherwise share one file, the second overwriting the
            # checkpoint the first version's recorded SHA-256 belongs to.
            path = (artifact_dir or Path(tmp)) / f"{family}-{int(now)}-{uuid.uuid4().hex[:12]}.ckpt"
            path.parent.mkdir(parents=True, exist_ok=True)
            save(path)
            artifact = path.read_bytes()
        sha = hashlib.sha256(artifact).hexdigest()
        artifact_path = str(path) if artifact_dir is not None else ""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    step = cut[0].step_s
    if still_leading is not None and not still_leading():
        removed = _remove_checkpoint(artifact_path)
        raise DataError(
            "This replica no longer holds the leader Lease (another replica took it during the fit, or this "
            f"one is shutting down): the retrained {family} model is dropped. {removed}{NOT_REGISTERED}",
            "Nothing to do: the leader retrains at its next jobs.retrain_cron time (a missed one is caught up).",
        )
    try:
        mid = store.register_model(
            f"{family}-{stamp}",
            family,
            data_source="daemon-history",
            data_start=min(s.start for s in cut),
            data_end=max(s.end for s in cut),
            step_s=step,
            hyperparams=_hyperparams(model, settings.forecast.horizon_s),
            metrics=metrics,
            artifact_path=artifact_path,
            artifact_sha256=sha,
            artifact=artifact,
            status="challenger",
            created_at=now,
        )
    except Exception as exc:
        # No version names the checkpoint file just written: prune would never remove it.
        removed = _remove_checkpoint(artifact_path)
        if not isinstance(exc, SQLAlchemyError):
            raise
        raise DataError(
            "The retrained model could not be registered: the database refused the write "
            f"({getattr(exc, 'orig', None) or exc}). "
            f"{removed}{NOT_REGISTERED}",
            "Check the database (another writer holding the lock, its server down, a full disk) and retrain again.",
        ) from exc
    groups = sorted({p.spec.rollout_group for p in policies}) or ["default"]
    book = RolloutBook(store)
    champion_name = champion_label or (champion.name if champion is not None else "")
    marker = {"retrained": True, "trigger": trigger, "model_version_id": mid, "family": family}
    ids: list[int] = []
    for group in groups:
        running = book.running(group)
        supersede = None
        if running is not None:
            if not running.results.get("retrained"):
                # Someone's own rollout is running: never step on it; the model stays registered.
                log.warning(
                    "rollout %d is running in group %s; challenger model %d is registered but not rolled out",
                    running.id,
                    group,
                    mid,
                    extra={"event": "retrain_not_rolled_out", "group": group, "model_version_id": mid},
                )
                continue
            # A newer retrained model replaces a retrained challenger that is still being tried.
            supersede = (running, {**running.results, "superseded_by_model": mid})
        # One transaction: the old rollout superseded, the new one created with its marker (a
        # rollout without the marker would be taken for someone's own and block every later retrain).
        mode = settings.jobs.rollout_mode
        ids.append(book.start(group, mode, champion_name, str(mid), now, results=marker, supersede=supersede))
    rollout_ids = tuple(ids)
    log.info(
        "retrained %s as challenger model %d (%s)",
        family,
        mid,
        trigger,
        extra={"event": "retrain", "model_version_id": mid, "rollouts": list(rollout_ids), **metrics},
    )
    return RetrainResult(mid, family, rollout_ids, metrics, artifact_path, model)
