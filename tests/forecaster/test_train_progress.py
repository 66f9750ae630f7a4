"""``LSTMForecaster.on_epoch``: one report per validation epoch, which `scaleahead train` prints."""

from __future__ import annotations

import math

from forecaster.lstm import LSTMForecaster
from scaleahead.traces import load_series


def test_fit_reports_each_epoch_with_its_validation_loss_and_the_seconds_since_it_started(tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    trace = load_series("alibaba-cpu-10s")
    history = trace.between(trace.start, trace.start + 2 * 86400.0)
    seen: list[tuple[int, int, float | None, float]] = []
    model = LSTMForecaster(replace(tiny_lstm_config, max_epochs=3, patience=5))
    model.on_epoch = lambda *report: seen.append(report)
    model.fit([history])
    assert [(e, n) for e, n, _, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    losses = [loss for _, _, loss, _ in seen]
    assert all(loss is not None and math.isfinite(loss) and loss > 0 for loss in losses), losses
    assert min(losses) == model.report.val_loss  # type: ignore[type-var]  # the best epoch is the one kept
    seconds = [s for *_, s in seen]
    assert seconds == sorted(seconds) and seconds[-1] <= model.report.train_s + 1.0
    assert model.report.epochs == 3


def test_without_a_reporter_fit_reports_nothing_and_trains_the_same(tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    trace = load_series("alibaba-cpu-10s")
    history = trace.between(trace.start, trace.start + 2 * 86400.0)
    quiet = LSTMForecaster(tiny_lstm_config).fit([history])
    told = LSTMForecaster(tiny_lstm_config)
    told.on_epoch = lambda *report: None
    told.fit([history])
    assert quiet.net is not None and told.net is not None
    for a, b in zip(quiet.net.state_dict().values(), told.net.state_dict().values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
