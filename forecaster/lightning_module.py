"""The thin LightningModule: optimiser, loss and logging around ``QuantileLSTM``; nothing else."""

from __future__ import annotations

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


class EpochCount(pl.Callback):
    """Puts the number of epochs trained in the trainer's ``callback_metrics``: what a spawned DDP
    worker (rank 0) sends back to the main process, whose trainer stays at epoch 0 (lstm.fit)."""

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.callback_metrics[EPOCHS_RUN] = torch.tensor(float(trainer.current_epoch))
