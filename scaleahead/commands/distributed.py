"""``scaleahead train-distributed``: the LSTM trained by several processes / nodes (Lightning DDP).

The single-process ``scaleahead train`` is the forecaster's; this command runs the same fit with a
DDP strategy over gloo (``forecaster.distributed``) and registers the model as a ``challenger``
(node 0 only). docs/operations.md shows it with 2 processes and as a multi-node Kubernetes Job.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from scaleahead.commands import check_fits, check_folder
from scaleahead.errors import UserError


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("train-distributed")
    def train_distributed(
        trace: Annotated[str, typer.Option(help="Trace name or series CSV to train on (its history split).")],
        processes: Annotated[int, typer.Option(min=1, help="Training processes on this node.")] = 2,
        num_nodes: Annotated[
            int, typer.Option(min=1, help="Nodes taking part (a Kubernetes indexed Job's completions).")
        ] = 1,
        out: Annotated[Path, typer.Option(help="Folder for the checkpoint (node 0).")] = Path("models"),
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                help="SQLAlchemy URL of the model registry (default: SCALEAHEAD_STORAGE__URL, else "
                "SCALEAHEAD_DB_URL, else SQLite; docs/storage.md).",
            ),
        ] = None,
        epochs: Annotated[int, typer.Option(min=1, help="Maximum epochs.")] = 30,
        hidden: Annotated[int, typer.Option(min=1, help="LSTM hidden size.")] = 32,
        max_train_windows: Annotated[
            int,
            typer.Option(
                min=100,
                help="Training windows sampled, shared among the series by length (each at least one: up to one "
                "more per series).",
            ),
        ] = 80000,
        days: Annotated[
            float | None, typer.Option(help="Use only the last DAYS of the history split (default: all of it).")
        ] = None,
    ) -> None:
        """Train the LSTM with Lightning DDP on CPU (gloo) across PROCESSES x NUM_NODES workers.

        On several nodes run the same command on each with NODE_RANK (or JOB_COMPLETION_INDEX),
        MASTER_ADDR and MASTER_PORT set; node 0 saves the checkpoint and registers it as a
        challenger. Prints {"world_size", "train_s", "max_epochs", "val_loss", "model_version_id", ...}.
        """
        import torch

        from forecaster.distributed import ddp_trainer_kwargs, node_rank
        from forecaster.lstm import LSTMConfig, LSTMForecaster
        from scaleahead.traces import load_series, split_of
        from storage import Store

        # before minutes of training: the registry's data_source column (PostgreSQL refuses a longer one)
        check_fits(
            "--trace",
            trace,
            "ModelVersionRow",
            "data_source",
            "Give a shorter path (a symbolic link); nothing was trained.",
        )
        rank = node_rank()
        os.environ["NODE_RANK"] = str(rank)
        if rank >= num_nodes:
            raise UserError(f"Node rank {rank} is not below --num-nodes {num_nodes}.", "Set NODE_RANK correctly.")
        store = None
        if rank == 0:  # node 0 saves and registers: a bad --out or --db fails now, not after training
            check_folder(out, "--out")
            store = Store(db)
        series = load_series(trace)
        sp = split_of(series, trace)
        data = series.between(sp.start, sp.test_start)
        if days is not None:
            data = data.between(data.end - days * 86400.0, data.end)
        torch.set_num_threads(1)  # one thread per process: the processes are the parallelism
        cfg = LSTMConfig(max_epochs=epochs, hidden=hidden, max_train_windows=max_train_windows, threads=1)
        model = LSTMForecaster(cfg)
        model.trainer_kwargs = ddp_trainer_kwargs(processes, num_nodes)
        model.fit([data])
        if rank != 0:
            print(json.dumps({"node_rank": rank, "world_size": model.world_size}))
            return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out.mkdir(parents=True, exist_ok=True)
        path = model.save(out / f"lstm-ddp-{stamp}.pt").resolve()
        import hashlib

        report = asdict(model.report)
        assert store is not None
        mid = store.register_model(
            "lstm-ddp",
            "lstm",
            data_source=trace,
            data_start=data.start,
            data_end=data.end,
            step_s=data.step_s,
            hyperparams={**asdict(cfg), "processes": processes, "num_nodes": num_nodes},
            metrics={**report, "world_size": model.world_size},
            artifact_path=str(path),
            artifact_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            artifact=path.read_bytes(),
            status="challenger",
        )
        print(
            json.dumps(
                {
                    "world_size": model.world_size,
                    "processes": processes,
                    "num_nodes": num_nodes,
                    "train_s": report["train_s"],
                    "max_epochs": epochs,
                    "train_windows": report["train_windows"],
                    "val_loss": report["val_loss"],
                    "model_version_id": mid,
                    "checkpoint": str(path),
                },
                indent=2,
            )
        )
