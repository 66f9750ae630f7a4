"""`scaleahead bench rebalance-speed`: synthetic clusters deterministic by seed, and the command end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaleahead.bench.rebalance_speed import HOSTNAME, ZONE, build_cluster
from scaleahead.commands.rebalance_speed import parse_pods_per_node
from scaleahead.errors import UserError


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaleahead.cli", "bench", "rebalance-speed", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_prints_a_row_per_plan_and_writes_the_rows_and_the_moves(tmp_path: Path) -> None:
    out_json, out_moves = tmp_path / "speed.json", tmp_path / "moves.json"
    run = _run(
        "--nodes", "12,20", "--pods-per-node", "6", "--max-moves", "2,4", "--seed", "3",
        "--json", str(out_json), "--moves", str(out_moves), "--tracemalloc",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == [
        "nodes",
        "pods",
        "max_moves",
        "new_pods",
        "moves",
        "wall_s",
        "cpu_s",
        "peak_rss_mb",
        "tracemalloc_peak_mb",
    ]
    printed = [line.split() for line in lines[1:5]]
    doc = json.loads(out_json.read_text())
    assert doc["params"]["nodes"] == [12, 20] and doc["params"]["max_moves"] == [2, 4]
    assert doc["params"]["pods_per_node"] == [3, 8] and doc["params"]["kind"] == "zones"
    assert [(c["nodes"], c["pods"] > 0) for c in doc["clusters"]] == [(12, True), (20, True)]
    rows = doc["rows"]
    assert [(r["nodes"], r["max_moves"]) for r in rows] == [(12, 2), (12, 4), (20, 2), (20, 4)]
    for row, shown in zip(rows, printed, strict=True):
        assert row.keys() >= {"pods", "moves", "wall_s", "cpu_s", "peak_rss_mb", "tracemalloc_peak_mb"}
        assert shown[:5] == [
            str(row["nodes"]),
            str(row["pods"]),
            str(row["max_moves"]),
            str(row["new_pods"]),
            str(row["moves"]),
        ]
        assert row["new_pods"] == 0
        assert 0 < row["moves"] <= row["max_moves"] and row["wall_s"] >= 0 and row["peak_rss_mb"] > 0
    moves = json.loads(out_moves.read_text())
    assert set(moves) == {"12x2", "12x4", "20x2", "20x4"}
    for key, row in zip(moves, rows, strict=True):
        assert len(moves[key]) == row["moves"]
        assert all(m["reason"].startswith(f"move {m['pod']} {m['from']} -> {m['to']}") for m in moves[key])


def test_new_workloads_add_pods_the_moves_keep_room_for(tmp_path: Path) -> None:
    """--new-workloads: that many workloads add 1-3 pods each in the same plan (deterministic by seed);
    the row counts them, and the moves leave them at least the room they had (first fit on the nodes
    the moves do not free)."""
    from dataclasses import replace

    from planner.rebalance import _Cluster, _room, _shapes
    from scaleahead.bench.rebalance_speed import new_pods, time_plan

    incoming = new_pods(400, seed=3)
    assert incoming == new_pods(400, seed=3) and incoming != new_pods(400, seed=4)
    assert all(1 <= i.count <= 3 and i.memory_request_mb == 2 * i.cpu_request_m for i in incoming)
    out_json = tmp_path / "speed.json"
    run = _run("--nodes", "12", "--pods-per-node", "6", "--max-moves", "4", "--seed", "3", "--new-workloads", "400",
               "--json", str(out_json))  # fmt: skip
    assert run.returncode == 0, run.stderr
    (row,) = json.loads(out_json.read_text())["rows"]
    assert row["new_pods"] == sum(i.count for i in incoming) and row["moves"] > 0

    def room(state):  # type: ignore[no-untyped-def]
        c = _Cluster.of(state)
        freed = frozenset(n for n in cluster_nodes_with_pods if not c.pods[n])
        return _room(c.arrays, c.arrays.req_cpu, c.arrays.req_mem, c.arrays.n_pods, _shapes(incoming), freed)

    cluster = build_cluster("zones", 8, (20, 40), seed=5)  # fuller nodes: the new pods do not all fit
    cluster_nodes_with_pods = {p.node for p in cluster.state.pods}
    _, moves = time_plan(cluster, 4, incoming=incoming)
    where = {(m.namespace, m.pod): m.to_node for m in moves}
    after = replace(
        cluster.state, pods=tuple(replace(p, node=where.get((p.namespace, p.name), p.node)) for p in cluster.state.pods)
    )
    assert room(cluster.state) < sum(i.count for i in incoming)
    assert room(after) >= room(cluster.state)


def test_new_zoned_workloads_select_a_zone_and_the_moves_keep_room_for_them_there(tmp_path: Path) -> None:
    """--new-zoned: a share of the new workloads select one zone (z0-z2 in turn); with zoned=0 the
    pods are those of before (same draws); the moves leave the zoned pods at least their room in
    their zone (the masks of ``_Room``)."""
    from dataclasses import replace

    from planner.rebalance import _Cluster, _Room
    from scaleahead.bench.rebalance_speed import ZONE, new_pods, time_plan

    assert new_pods(300, seed=3, zoned=0.0) == new_pods(300, seed=3)
    zoned = new_pods(300, seed=3, zoned=0.5)
    ruled = [i for i in zoned if i.rules is not None]
    assert 100 < len(ruled) < 200
    assert {i.rules.node_selector[ZONE] for i in ruled} == {"z0", "z1", "z2"}  # type: ignore[union-attr]
    assert [(i.cpu_request_m, i.count) for i in zoned] == [(i.cpu_request_m, i.count) for i in new_pods(300, seed=3)]
    out_json = tmp_path / "speed.json"
    run = _run("--nodes", "12", "--pods-per-node", "6", "--max-moves", "4", "--seed", "3", "--new-workloads", "300",
               "--new-zoned", "0.5", "--json", str(out_json))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(out_json.read_text())["params"]["new_zoned"] == 0.5
    cluster = build_cluster("zones", 9, (20, 40), seed=5)
    _, moves = time_plan(cluster, 4, incoming=zoned)
    where = {(m.namespace, m.pod): m.to_node for m in moves}
    after = replace(
        cluster.state, pods=tuple(replace(p, node=where.get((p.namespace, p.name), p.node)) for p in cluster.state.pods)
    )
    before_room = _Room.of(_Cluster.of(cluster.state), zoned)
    assert before_room.start < sum(i.count for i in zoned)
    occupied = {p.node for p in cluster.state.pods}
    c = _Cluster.of(after)
    freed = frozenset(n for n in occupied if not c.pods[n])
    from planner.rebalance import _room

    a = c.arrays
    assert _room(a, a.req_cpu, a.req_mem, a.n_pods, before_room.shapes, freed, before_room.masks) >= before_room.start


def test_the_command_refuses_bad_options_before_any_work(tmp_path: Path) -> None:
    for args, said in (
        (["--nodes", "0"], "--nodes"),
        (["--pods-per-node", "5-2"], "--pods-per-node"),
        (["--cluster", "plain", "--zone-terms", "0.1"], "--cluster zones"),
        (["--cluster", "huge"], "--cluster"),
        (["--json", str(tmp_path / "no" / "f.json")], "does not exist"),
    ):
        run = _run(*args)
        assert run.returncode != 0 and said in run.stdout + run.stderr, (args, run.stdout, run.stderr)


def test_clusters_are_deterministic_by_seed_and_follow_their_shares() -> None:
    a = build_cluster("zones", 60, (10, 20), zone_terms=0.2, hostname_terms=0.5, seed=1)
    assert a.state == build_cluster("zones", 60, (10, 20), zone_terms=0.2, hostname_terms=0.5, seed=1).state
    assert a.state != build_cluster("zones", 60, (10, 20), zone_terms=0.2, hostname_terms=0.5, seed=2).state
    per_node = [sum(1 for p in a.state.pods if p.node == n.name) for n in a.state.nodes]
    assert min(per_node) >= 10 and max(per_node) <= 20
    info = a.describe()
    assert 0.1 < info["pods_with_zone_term"] / info["pods"] < 0.3
    assert 0.4 < info["pods_with_hostname_term"] / info["pods"] < 0.6
    assert {n.labels[ZONE] for n in a.state.nodes} == {"z0", "z1", "z2"}
    assert all(n.labels[HOSTNAME] == n.name for n in a.state.nodes)
    plain = build_cluster("plain", 30, (2, 14), seed=0)
    assert all(not p.labels and not p.anti_affinity_terms for p in plain.state.pods)


def test_pods_per_node_is_a_range_or_the_reviews_mean() -> None:
    assert parse_pods_per_node("2-14") == (2, 14)
    assert parse_pods_per_node("29") == (14, 42)  # the review's rng.integers(29 // 2, 29 * 3 // 2)
    for bad in ("0", "x", "4-1", "0-3"):
        with pytest.raises(UserError):
            parse_pods_per_node(bad)
