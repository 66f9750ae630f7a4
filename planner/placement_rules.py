"""Whether a pod may run on a node by its own rules: node selector, required node affinity, taints.

Why it exists: a move the scheduler would refuse is worse than no move. The rebalancer evicts the
pod and the steering webhook pins its replacement to the planned node, ANDed with the pod's own
required node affinity (actuator/steering.py); if the pod's rules exclude that node, the
replacement stays Pending for good. So every node a move targets must pass these rules, as
kube-scheduler's ``NodeAffinity`` and ``TaintToleration`` filters apply them:

- ``spec.nodeSelector``: the node has every one of its labels, with that value;
- required node affinity: the node matches at least one ``nodeSelectorTerm`` (the terms are ORed)
  and a term matches when every one of its requirements does (ANDed); an empty term matches no
  node. ``matchExpressions`` read the node's labels: ``In`` (the label is one of the values),
  ``NotIn`` (absent or none of them), ``Exists``, ``DoesNotExist``, ``Gt`` / ``Lt`` (the label and
  the one value are base-10 64-bit integers, compared as numbers; anything else does not match).
  ``matchFields`` read the node's fields: ``metadata.name`` (an unknown field matches nothing);
  an unknown operator matches nothing;
- taints: every ``NoSchedule`` and ``NoExecute`` taint of the node is tolerated by one of the
  pod's tolerations (``PreferNoSchedule`` is a preference, not a filter). A toleration matches a
  taint when its effect is empty or the same, its key is empty or the same, and its operator is
  ``Exists``, or ``Equal`` (or empty) with the same value (Kubernetes' ``ToleratesTaint``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from scaleahead.types import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration

#: The taint effects the scheduler filters on (``PreferNoSchedule`` only lowers a node's score).
FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = (-(2**63), 2**63 - 1)


def _int64(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it; None where that fails."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    """Whether one requirement holds for a node with these labels (``matchExpressions``) or fields
    (``matchFields``, by ``req.field``)."""
    key, op, values, on_field = req
    if on_field and key not in fields:
        return False
    have = (fields if on_field else labels).get(key)
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt"):
        if have is None or len(values) != 1:
            return False
        mine, bound = _int64(have), _int64(values[0])
        if mine is None or bound is None:
            return False
        return mine > bound if op == "Gt" else mine < bound
    return False


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """Whether ``node`` matches one node-selector term: every requirement holds; an empty term
    matches nothing."""
    fields = {"metadata.name": node.name}
    return bool(term) and all(requirement_matches(r, node.labels, fields) for r in term)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``."""
    key, op, value, effect = toleration
    if effect and effect != taint.effect:
        return False
    if key and key != taint.key:
        return False
    if op in ("", "Equal"):
        return value == taint.value
    return op == "Exists"


def node_fit_problem(pod: Pod, node: Node) -> str | None:
    """Why ``pod``'s own rules keep it off ``node`` (a sentence), or None when they allow it.

    Only the pod's rules about nodes: capacity, schedulability and anti-affinity are the caller's.
    """
    for key, value in sorted(pod.node_selector.items()):
        if node.labels.get(key) != value:
            return f"its nodeSelector {key}={value} does not match node {node.name}"
    if pod.required_node_terms and not any(term_matches(t, node) for t in pod.required_node_terms):
        return f"no term of its required node affinity matches node {node.name}"
    for taint in node.taints:
        if taint.effect in FILTERED_EFFECTS and not any(tolerates(t, taint) for t in pod.tolerations):
            shown = f"{taint.key}={taint.value}" if taint.value else taint.key
            return f"it does not tolerate node {node.name}'s taint {shown}:{taint.effect}"
    return None


def fits_node(pod: Pod, node: Node) -> bool:
    """Whether ``pod``'s node selector, required node affinity and tolerations let it run on ``node``
    (``node_fit_problem`` finds nothing)."""
    return node_fit_problem(pod, node) is None


def placement_signature(pod: Pod) -> tuple[object, ...]:
    """What ``fits_node`` reads of a pod: pods with the same signature fit the same nodes."""
    return (tuple(sorted(pod.node_selector.items())), pod.required_node_terms, pod.tolerations)
