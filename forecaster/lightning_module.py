"""The thin LightningModule: optimiser, loss and logging around ``QuantileLSTM``; nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
import torch

from forecaster.net import QuantileLSTM, pinball_loss


class QuantileLSTMModule(pl.LightningModule):
    """Trains ``QuantileLSTM`` with the pinball loss; one ``_common_step`` for train/val/test."""

    def __init__(
        self,
        n_seq_features: int,
        n_static: int,
        horizon: int,
        quantiles: tuple[float, ...],
        context: int,
        hidden: int = 64,
        mlp: int = 128,
        dropout: float = 0.1,
        lr: float = 3e-3,
        weight_decay: float = 1e-5,
        highway: bool = True,
        prior: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = QuantileLSTM(
            n_seq_features, n_static, horizon, len(quantiles), context, hidden, mlp, dropout, highway, prior
        )
        self.lr = lr
        self.weight_decay = weight_decay
        self.q: torch.Tensor
        self.register_buffer("q", torch.tensor(quantiles, dtype=torch.float32))

    def forward(self, seq: torch.Tensor, static: torch.Tensor) -> torch.Tensor:
        return self.net(seq, static)  # type: ignore[no-any-return]

    def _common_step(self, batch: tuple[torch.Tensor, ...], stage: str) -> torch.Tensor:
        seq, static, target, mask, weight = batch  # [B,L,F], [B,S], [B,H], [B,H], [B]
        pred = self.net(seq, static)  # [B, H, Q]
        loss = pinball_loss(pred, target, mask, weight, self.q)
        # sync_dist: under DDP each process validates its own shard; the LR scheduler, EarlyStopping and
        # ModelCheckpoint of every process must see the same, global loss, or their copies drift apart
        # (one halves its learning rate, another does not). A no-op in a single process.
        self.log(
            f"{stage}_loss",
            loss,
            prog_bar=False,
            on_epoch=True,
            on_step=False,
            batch_size=seq.shape[0],
            sync_dist=stage != "train",
        )
        return loss

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        return self._common_step(batch, "train")

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        return self._common_step(batch, "val")

    def test_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        return self._common_step(batch, "test")

    def on_fit_start(self) -> None:
        # Denormal flushing is per-thread CPU state: set it here too, so that the processes DDP
        # spawns (forecaster.distributed) train with it like the caller (lstm.flushed_denormals).
        torch.set_flush_denormal(True)

    def configure_optimizers(self) -> Any:
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_loss"}}


#: The ``callback_metrics`` key under which ``EpochCount`` reports the number of epochs trained.
EPOCHS_RUN = "scaleahead_epochs_run"


class EpochProgress(pl.Callback):
    """Calls ``report(epoch, max_epochs, val_loss, seconds since the fit started)`` after each
    validation epoch (global rank 0 only): `scaleahead train` prints a line per epoch with it. The
    callback does no I/O itself."""

    def __init__(self, report: Callable[[int, int, float | None, float], None]) -> None:
        self.report = report
        self._started = time.perf_counter()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started = time.perf_counter()

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or int(trainer.global_rank) != 0:
            return
        loss = trainer.callback_metrics.get("val_loss")
        self.report(
            int(trainer.current_epoch) + 1,
            int(trainer.max_epochs or 0),
            None if loss is None else float(loss),
            time.perf_counter() - self._started,
        )


class StopOnInterrupt(pl.Callback):
    """Ctrl-C is never lost in training: once ``requested`` (set by the SIGINT handler that
    ``LSTMForecaster.fit`` installs for its ``trainer.fit``), every batch and epoch boundary raises
    ``KeyboardInterrupt`` again.

    The handler's own ``KeyboardInterrupt`` is raised wherever the main thread happens to be, and
    library code that clears every error (C code that looks an attribute up and drops what failed)
    can swallow it: CI saw a training run go on for 7 more epochs and register its model after a
    Ctrl-C. The flag outlives the swallowed exception.
    """

    def __init__(self) -> None:
        self.requested = False

    def _check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int) -> None:
        self._check()

    def on_validation_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int, dataloader_idx: int = 0
    ) -> None:
        self._check()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check()

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check()


class EpochCount(pl.Callback):
    """Puts the number of epochs trained in the trainer's ``callback_metrics``: what a spawned DDP
    worker (rank 0) sends back to the main process, whose trainer stays at epoch 0 (lstm.fit)."""

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.callback_metrics[EPOCHS_RUN] = torch.tensor(float(trainer.current_epoch))
