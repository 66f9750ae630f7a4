"""Training the LSTM across several processes (and nodes) with Lightning DDP on CPU.

Why: one process trains on one core; DDP splits each epoch's batches across ``processes`` x
``num_nodes`` workers that average gradients over gloo (the CPU backend), so a bigger history or a
bigger model trains in less wall time on a multi-core node or several nodes (a Kubernetes indexed
Job, deploy/training/). Processes are spawned (``start_method="spawn"``), so the calling command is
not re-run; on several nodes each node runs the same command with ``NODE_RANK``, ``MASTER_ADDR``
and ``MASTER_PORT`` set, and only node 0 keeps the result.
"""

from __future__ import annotations

import os
from typing import Any


def ddp_trainer_kwargs(processes: int, num_nodes: int = 1) -> dict[str, Any]:
    """``pl.Trainer`` arguments for DDP over gloo with ``processes`` per node on ``num_nodes`` nodes."""
    from pytorch_lightning.strategies import DDPStrategy

    if processes < 1 or num_nodes < 1:
        raise ValueError("processes and num_nodes must be at least 1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    return {
        "strategy": DDPStrategy(process_group_backend="gloo", start_method="spawn"),
        "devices": processes,
        "num_nodes": num_nodes,
        # deterministic=True asks for deterministic algorithms, which DDP's gloo all-reduce honours.
    }


def node_rank() -> int:
    """This node's rank: ``NODE_RANK``, else a Kubernetes indexed Job's ``JOB_COMPLETION_INDEX``, else 0."""
    for var in ("NODE_RANK", "JOB_COMPLETION_INDEX"):
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit():
            return int(value)
    return 0
