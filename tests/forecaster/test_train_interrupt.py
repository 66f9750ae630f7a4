"""Ctrl-C during ``scaleahead train``: exit 130 and "interrupted", nothing saved or registered."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import as_typed_at_a_terminal, ctrl_c


def test_ctrl_c_during_training_exits_130_says_interrupted_and_registers_nothing(tmp_path: Path) -> None:
    db, out = tmp_path / "a.db", tmp_path / "models"
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaleahead.cli", "train", "--trace", "nasa-10s", "--epochs", "30"]
        + ["--db", f"sqlite:///{db}", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_typed_at_a_terminal,
    )
    assert proc.stderr is not None
    seen = ""
    # The first epoch's progress line: inside Lightning's fit, which catches KeyboardInterrupt and
    # calls sys.exit(1) (until 2026-12-05 evening the test slept 12 s after "training the LSTM").
    while "epoch 1/30: val pinball" not in seen:
        line = proc.stderr.readline()
        assert line, f"the command ended before it trained: {seen}"
        seen += line
    code, err, state = ctrl_c(proc, seen)
    assert code == 130, f"{err}\n{state}"  # was 1, with no message
    assert "interrupted" in err and "Traceback" not in err
    assert not out.exists()
    from storage import Store

    assert Store(f"sqlite:///{db}", create=False).models() == []


def _history():  # type: ignore[no-untyped-def]
    from scaleahead.traces import load_series

    trace = load_series("alibaba-cpu-10s")
    return trace.between(trace.start, trace.start + 2 * 86400.0)


def test_a_ctrl_c_that_library_code_swallows_still_stops_training_at_the_next_batch(
    tiny_lstm_config, monkeypatch: pytest.MonkeyPatch, ctrl_c_raises: None
) -> None:  # type: ignore[no-untyped-def]
    """CI (2026-12-07): a Ctrl-C after the first epoch's line, and `scaleahead train` went on for 7 more
    epochs and exited 0. The handler's ``KeyboardInterrupt`` is raised wherever the main thread is; C
    code that clears every error loses it. Here a training step swallows it as such code would."""
    import os
    import time
    from dataclasses import replace

    from forecaster.lightning_module import QuantileLSTMModule
    from forecaster.lstm import LSTMForecaster

    steps: list[int] = []
    swallowed: list[bool] = []
    step = QuantileLSTMModule.training_step

    def swallowing_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        steps.append(batch_idx)
        if len(steps) == 3:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1.0)  # the handler runs at the next bytecode, inside this try
            except KeyboardInterrupt:
                swallowed.append(True)
        return step(self, batch, batch_idx)

    monkeypatch.setattr(QuantileLSTMModule, "training_step", swallowing_step)
    epochs: list[int] = []
    model = LSTMForecaster(replace(tiny_lstm_config, max_epochs=3, patience=5))
    model.on_epoch = lambda epoch, *_: epochs.append(epoch)
    with pytest.raises(KeyboardInterrupt):
        model.fit([_history()])
    assert swallowed == [True]
    assert len(steps) == 3 and epochs == []  # stopped before the next batch, not after the epochs
    assert model.net is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_ctrl_c_swallowed_after_the_last_batch_still_ends_the_fit_in_keyboard_interrupt(
    tiny_lstm_config, monkeypatch: pytest.MonkeyPatch, ctrl_c_raises: None
) -> None:  # type: ignore[no-untyped-def]
    """No batch is left to raise it again: ``fit`` raises it as it returns, and keeps no model."""
    import os
    import time

    from forecaster.lightning_module import EpochCount
    from forecaster.lstm import LSTMForecaster

    end = EpochCount.on_train_end

    def swallowing_end(self, trainer, module):  # type: ignore[no-untyped-def]
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)
        except KeyboardInterrupt:
            pass
        end(self, trainer, module)

    monkeypatch.setattr(EpochCount, "on_train_end", swallowing_end)
    model = LSTMForecaster(tiny_lstm_config)
    with pytest.raises(KeyboardInterrupt):
        model.fit([_history()])
    assert model.net is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_pressed_again_while_the_handler_is_put_back_still_puts_it_back(
    tiny_lstm_config, monkeypatch: pytest.MonkeyPatch, ctrl_c_raises: None
) -> None:  # type: ignore[no-untyped-def]
    """``signal.signal`` runs a pending handler before it swaps: a Ctrl-C pending then raises from
    the call that puts Python's handler back (a review of 2026-12-07 left the wrapper installed)."""
    from forecaster.lstm import LSTMForecaster

    real = signal.signal
    raised: list[bool] = []

    def pending_ctrl_c(sig, handler):  # type: ignore[no-untyped-def]
        if handler is signal.default_int_handler and not raised:
            raised.append(True)
            raise KeyboardInterrupt
        return real(sig, handler)

    monkeypatch.setattr(signal, "signal", pending_ctrl_c)
    model = LSTMForecaster(tiny_lstm_config)
    with pytest.raises(KeyboardInterrupt):  # the Ctrl-C counts
        model.fit([_history()])
    assert raised == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_fit_with_another_sigint_handler_keeps_it_and_trains(tiny_lstm_config) -> None:  # type: ignore[no-untyped-def]
    """The daemon stops gracefully on SIGINT with its own handler: fit neither replaces nor drops it."""
    from forecaster.lstm import LSTMForecaster

    calls: list[int] = []

    def stop(signum, frame):  # type: ignore[no-untyped-def]
        calls.append(signum)

    seen: list[object] = []
    previous = signal.signal(signal.SIGINT, stop)
    try:
        model = LSTMForecaster(tiny_lstm_config)
        model.on_epoch = lambda *_: seen.append(signal.getsignal(signal.SIGINT))
        model.fit([_history()])
        assert seen and all(h is stop for h in seen)
        assert signal.getsignal(signal.SIGINT) is stop and model.net is not None and calls == []
    finally:
        signal.signal(signal.SIGINT, previous)
