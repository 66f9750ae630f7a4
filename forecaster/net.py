"""The LSTM network in plain torch: recent history through the recurrence, the rest beside it.

Kept apart from Lightning (training) and from the user-facing ``LSTMForecaster`` (features,
scaling, checkpoints) so the maths can be read on one screen. The recurrence only sees the
recent native-resolution window (about 90 steps); the long and seasonal context enters as a
coarse static vector, which keeps training and inference fast on CPU.

A linear "highway" from the last 12 values to the forecast location
(LSTNet's autoregressive component) lets the network start from what a linear model on lags
would say; the recurrence and the MLP learn the non-linear corrections and the spread.

With ``prior=True`` (the hybrid, as in ES-RNN) the last ``horizon`` static columns are a
baseline's point forecast in units of scale minus 1 (``forecaster.lstm``: the ridge baseline's);
it is added to the lowest quantile's base, so the network learns the *correction* to that
forecast and the spread around it instead of the level from scratch.

Quantiles never cross by construction: the head gives the lowest quantile and softplus
increments that are summed up (cumulative), so q_1 <= q_2 <= ... for every step.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


class QuantileLSTM(nn.Module):
    """Recent sequence + static context -> ``[batch, horizon, n_quantiles]`` non-crossing quantiles."""

    def __init__(
        self,
        n_seq_features: int,
        n_static: int,
        horizon: int,
        n_quantiles: int,
        context: int,
        hidden: int = 64,
        mlp: int = 128,
        dropout: float = 0.1,
        highway: bool = True,
        prior: bool = False,
    ) -> None:
        super().__init__()
        self.prior = prior
        self.horizon = horizon
        self.n_quantiles = n_quantiles
        self.lstm = nn.LSTM(n_seq_features, hidden, batch_first=True)
        self.highway_lags = min(context, 12)
        self.highway = nn.Linear(self.highway_lags, horizon) if highway else None
        self.head = nn.Sequential(
            nn.Linear(hidden + n_static, mlp),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(mlp, mlp),
            nn.ReLU(),
            nn.Linear(mlp, horizon * n_quantiles),
        )

    def forward(self, seq: torch.Tensor, static: torch.Tensor) -> torch.Tensor:
        # seq [batch, context, n_seq_features]; static [batch, n_static]
        _, (h, _) = self.lstm(seq)  # h [1, batch, hidden]
        z = torch.cat([h[-1], static], dim=1)  # [batch, hidden + n_static]
        raw = self.head(z).view(-1, self.horizon, self.n_quantiles)  # [batch, horizon, n_quantiles]
        base = raw[..., :1]  # [batch, horizon, 1]: the lowest quantile
        if self.highway is not None:
            lin = self.highway(seq[:, -self.highway_lags :, 0])  # [batch, horizon] from the last 12 values
            base = base + lin.unsqueeze(-1)
        if self.prior:
            base = base + (static[:, -self.horizon :] + 1.0).unsqueeze(-1)  # the baseline's forecast [B, H, 1]
        steps = F.softplus(raw[..., 1:])  # [batch, horizon, n_quantiles - 1], >= 0
        return torch.cumsum(torch.cat([base, steps], dim=-1), dim=-1)  # [batch, horizon, n_quantiles]


def pinball_loss(
    pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor, quantiles: torch.Tensor
) -> torch.Tensor:
    """Mean pinball loss over observed targets.

    Args:
        pred: ``[batch, horizon, n_quantiles]``.
        target: ``[batch, horizon]`` (missing targets hold any finite value).
        mask: ``[batch, horizon]``, 1 where the target was observed.
        weight: ``[batch]`` per-window weight (the window's scale relative to its series').
        quantiles: ``[n_quantiles]``.
    """
    err = target.unsqueeze(-1) - pred  # [batch, horizon, n_quantiles]
    loss = torch.maximum(quantiles * err, (quantiles - 1) * err).mean(dim=-1)  # [batch, horizon]
    w = mask * weight.unsqueeze(-1)  # [batch, horizon]
    return (loss * w).sum() / mask.sum().clamp_min(1.0)
