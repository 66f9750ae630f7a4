"""Tests that pin behaviour a mutation audit of 2026-12-06 found unpinned: each failed on a mutant
of the code (named in the comment above each test: the audit's id and the behaviour) that every
earlier test let pass."""

from __future__ import annotations

from rebalance_builders import cluster, node, pod

from planner.rebalance import PdbBudgets, plan_moves
from scaleahead.types import Pod, PodDisruptionBudget

# RB11: PdbBudgets.allow counts every pod of a joint move (an exchange) against its PDBs: a PDB


def p(name, owner):
    return Pod("app", name, "n1", 100, 100, owner=owner)


def test_two_pods_of_one_pdb_with_one_disruption_left_cannot_move_together():
    b = PdbBudgets.of([PodDisruptionBudget("app", "front", "web", 1), PodDisruptionBudget("app", "front", "api", 1)])
    assert b.allow([p("web-1", "web")])
    assert not b.allow([p("web-1", "web"), p("web-2", "web")])
    assert not b.allow([p("web-1", "web"), p("api-1", "api")]), "one PDB over both owners: one disruption in all"


# RB09: plan_moves never returns more than max_moves moves, also over several drain steps.


def test_the_move_count_stays_within_max_moves_across_steps():
    state = cluster(
        [node("a"), node("b"), node("c")],
        [pod("web-1", "a", 500), pod("api-1", "b", 500), pod("api-2", "b", 500), pod("db-1", "c", 6000, owner="")],
    )
    assert len(plan_moves(state, max_moves=5)) == 3  # both small nodes drained onto c
    for k in (1, 2, 3):
        got = plan_moves(state, max_moves=k)
        assert len(got) <= k, (k, [(m.pod, m.from_node, m.to_node) for m in got])


# RB05 (+ the same check in _safe): no move onto a node whose memory requests would exceed its


def test_no_move_when_memory_requests_would_not_fit():
    pods = [pod("web-1", "a", 1000, mem=3000), pod("db-1", "b", 6000, mem=8000)]
    assert plan_moves(cluster([node("a"), node("b")], pods), max_moves=5) == ()  # 3000 + 8000 > 10000
    fits = [pod("web-1", "a", 1000, mem=2000), pod("db-1", "b", 6000, mem=8000)]
    assert [(m.pod, m.to_node) for m in plan_moves(cluster([node("a"), node("b")], fits), max_moves=5)] == [
        ("web-1", "b")
    ]
