"""Whether a pod may run next to other pods: required pod anti-affinity, host ports.

Why it exists: a move the scheduler would refuse is worse than no move (``planner.placement_rules``
says why). Besides a pod's rules about nodes, kube-scheduler's ``InterPodAffinity`` and
``NodePorts`` filters refuse a node because of the pods already there, so every node a move
targets must pass these rules too, as those filters apply them:

- required pod anti-affinity, both ways: the pod may not join a *domain* where a pod runs that one
  of its terms selects, nor one where a pod runs whose term selects it (an existing pod's rule
  keeps incoming pods out, which is how the scheduler checks it). A term's domain is the set of
  nodes whose label ``topology_key`` has the same value (``kubernetes.io/hostname``: a node;
  ``topology.kubernetes.io/zone``: a zone); a node without that label is in no domain, so the term
  neither keeps a pod off it nor is kept by a pod on it (the scheduler counts only labelled nodes).
  A term selects a pod by namespace and ``labelSelector`` (``matchLabels`` and ``matchExpressions``
  ``In`` / ``NotIn`` / ``Exists`` / ``DoesNotExist``, ANDed; ``LabelSelector.matches``);
- the shorthand anti-affinity of hand-built and benchmark clusters (``Pod.anti_affinity``: an owner
  name or a ``key=value`` label, on the same node only), both ways (``conflicts``);
- host ports: two pods on one node may not bind the same port and protocol on overlapping
  addresses (an empty or ``0.0.0.0`` address overlaps every address; ``::`` is read the same way,
  which only refuses more).

The pod being moved is not its own neighbour: its old copy is evicted (while it terminates, its
replacement may wait a few seconds for it, not for good).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaleahead.types import HostPort, Node, Pod

#: Host addresses that bind every address of the node.
_EVERY_ADDRESS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - compared with, never bound


def excludes(a: Pod, b: Pod) -> bool:
    """Whether pod ``a``'s shorthand anti-affinity (``Pod.anti_affinity``) excludes pod ``b`` from its node.

    A rule is an owner name (``"cart"``: no other pod of owner ``cart`` in the same namespace) or a
    label ``"key=value"`` matched against ``b``'s labels (any namespace).
    """
    for rule in a.anti_affinity:
        if "=" in rule:
            k, _, v = rule.partition("=")
            if b.labels.get(k) == v:
                return True
        elif rule == b.owner and a.namespace == b.namespace:
            return True
    return False


def conflicts(a: Pod, b: Pod) -> bool:
    """Whether two different pods may not share a node by their shorthand anti-affinity, either way."""
    return (a.namespace, a.name) != (b.namespace, b.name) and (excludes(a, b) or excludes(b, a))


def ports_overlap(a: HostPort, b: HostPort) -> bool:
    """Whether two host ports clash on one node: same port and protocol, overlapping addresses."""
    if a.port <= 0 or a.port != b.port or (a.protocol or "TCP") != (b.protocol or "TCP"):
        return False
    return a.host_ip in _EVERY_ADDRESS or b.host_ip in _EVERY_ADDRESS or a.host_ip == b.host_ip


def port_clash(pod: Pod, others: Iterable[Pod]) -> tuple[HostPort, Pod] | None:
    """A host port of ``pod`` that one of ``others`` (pods on one node) binds too, and that pod."""
    if not pod.host_ports:
        return None
    for q in others:
        if (q.namespace, q.name) == (pod.namespace, pod.name):
            continue
        for mine in pod.host_ports:
            if any(ports_overlap(mine, theirs) for theirs in q.host_ports):
                return mine, q
    return None


def term_domain(node: Node, topology_key: str) -> str | None:
    """The domain ``node`` is in for a term with ``topology_key``: the label's value; None: none."""
    return node.labels.get(topology_key)


def anti_affinity_problem(pod: Pod, node: Node, others: Iterable[tuple[Pod, Node]]) -> str | None:
    """Why ``pod`` may not run on ``node`` by required pod anti-affinity (a sentence), or None.

    ``others``: pods with the node each runs on; those in no domain the check reads are ignored, so
    passing every pod of the cluster is right, and passing those of the nodes that share a domain
    with ``node`` is enough. Both ways: ``pod``'s terms against them, their terms against ``pod``;
    and the shorthand rules (``conflicts``) against the pods on ``node`` itself.
    """
    me = (pod.namespace, pod.name)
    mine = [(t, here) for t in pod.anti_affinity_terms if (here := term_domain(node, t.topology_key)) is not None]
    for q, where in others:
        if (q.namespace, q.name) == me:
            continue
        if where.name == node.name and conflicts(pod, q):
            return f"it and {q.namespace}/{q.name} on node {node.name} exclude each other (anti-affinity)"
        for term, here in mine:
            if term_domain(where, term.topology_key) == here and term.selects(q, pod.namespace):
                return (
                    f"its anti-affinity ({term.topology_key}={here}) excludes {q.namespace}/{q.name} "
                    f"on node {where.name}"
                )
        for term in q.anti_affinity_terms:
            here = term_domain(node, term.topology_key)
            if here is not None and term_domain(where, term.topology_key) == here and term.selects(pod, q.namespace):
                return (
                    f"the anti-affinity of {q.namespace}/{q.name} on node {where.name} "
                    f"({term.topology_key}={here}) excludes it"
                )
    return None


def neighbour_problem(pod: Pod, node: Node, others: Iterable[tuple[Pod, Node]]) -> str | None:
    """Why the pods already placed keep ``pod`` off ``node`` (a sentence), or None when they allow it:
    anti-affinity (``anti_affinity_problem``) and host ports (against the pods on ``node``).

    Only the rules between pods: the pod's node rules (``placement_rules``) and capacity are the
    caller's.
    """
    placed = list(others)
    clash = port_clash(pod, (q for q, where in placed if where.name == node.name))
    if clash is not None:
        port, q = clash
        return f"{q.namespace}/{q.name} on node {node.name} binds its host port {port.port}/{port.protocol}"
    return anti_affinity_problem(pod, node, placed)


def has_pod_rules(pod: Pod) -> bool:
    """Whether ``pod`` has a rule ``neighbour_problem`` reads beyond the shorthand anti-affinity."""
    return bool(pod.anti_affinity_terms or pod.host_ports)
