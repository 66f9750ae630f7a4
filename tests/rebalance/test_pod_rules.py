"""pod_rules and label selectors: required pod anti-affinity by topology domain, either way, and host
ports, as kube-scheduler's InterPodAffinity and NodePorts filters read them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rebalance_builders import pod

from planner.pod_rules import anti_affinity_problem, neighbour_problem, ports_overlap
from scaleahead.types import HostPort, LabelRequirement, LabelSelector, Node, Pod, PodAffinityTerm

R = LabelRequirement


def a_node(name: str, **labels: str) -> Node:
    return Node(name, 8000, 8000, {"kubernetes.io/hostname": name, **labels})


def labelled(name: str, on: str, ns: str = "app", **labels: str) -> Pod:
    return replace(pod(name, on, 500, ns=ns), labels=labels)


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        (LabelSelector(), True),  # the empty selector selects everything
        (LabelSelector((("app", "db"),)), True),
        (LabelSelector((("app", "db"), ("tier", "front"))), False),  # matchLabels are ANDed
        (LabelSelector((), (R("app", "In", ("db", "cache")),)), True),
        (LabelSelector((), (R("app", "In", ("cache",)),)), False),
        (LabelSelector((), (R("app", "NotIn", ("cache",)),)), True),
        (LabelSelector((), (R("app", "NotIn", ("db",)),)), False),
        (LabelSelector((), (R("tier", "NotIn", ("db",)),)), True),  # NotIn holds for an absent label
        (LabelSelector((), (R("tier", "In", ("db",)),)), False),  # In does not
        (LabelSelector((), (R("zone", "Exists"),)), True),
        (LabelSelector((), (R("tier", "Exists"),)), False),
        (LabelSelector((), (R("tier", "DoesNotExist"),)), True),
        (LabelSelector((), (R("zone", "DoesNotExist"),)), False),
        (LabelSelector((("app", "db"),), (R("zone", "In", ("z1",)), R("zone", "NotIn", ("z1",)))), False),
        (LabelSelector((), (R("app", "Gt", ("1",)),)), True),  # refused by the API: read as selecting
    ],
)
def test_a_label_selector_reads_match_labels_and_match_expressions(selector: LabelSelector, selected: bool) -> None:
    assert selector.matches({"app": "db", "zone": "z1"}) is selected


def test_a_term_selects_pods_of_its_own_namespace_unless_it_names_others_or_has_a_namespace_selector() -> None:
    db = labelled("db-1", "n1", ns="data", app="db")
    selector = LabelSelector((("app", "db"),))
    assert not PodAffinityTerm(selector, (), "kubernetes.io/hostname").selects(db, "app")
    assert PodAffinityTerm(selector, (), "kubernetes.io/hostname").selects(db, "data")
    assert PodAffinityTerm(selector, ("data", "web"), "kubernetes.io/hostname").selects(db, "app")
    assert not PodAffinityTerm(selector, ("web",), "kubernetes.io/hostname").selects(db, "app")
    assert PodAffinityTerm(selector, None, "kubernetes.io/hostname").selects(db, "app")  # every namespace
    assert not PodAffinityTerm(None, None, "kubernetes.io/hostname").selects(db, "app")  # no labelSelector


ZONE = "topology.kubernetes.io/zone"
NOT_WITH_DB = (PodAffinityTerm(LabelSelector((), (R("app", "In", ("db",)),)), (), ZONE),)


def test_a_zone_term_keeps_a_pod_out_of_every_node_of_the_zone_where_a_selected_pod_runs() -> None:
    z1a, z1b, z2 = a_node("z1a", **{ZONE: "z1"}), a_node("z1b", **{ZONE: "z1"}), a_node("z2a", **{ZONE: "z2"})
    web = replace(labelled("web-1", "z2a", app="web"), anti_affinity_terms=NOT_WITH_DB)
    db = labelled("db-1", "z1a", app="db")
    problem = anti_affinity_problem(web, z1b, [(db, z1a)])
    assert problem == f"its anti-affinity ({ZONE}=z1) excludes app/db-1 on node z1a"
    assert anti_affinity_problem(web, z2, [(db, z1a)]) is None
    hostname = (NOT_WITH_DB[0]._replace(topology_key="kubernetes.io/hostname"),)
    assert anti_affinity_problem(replace(web, anti_affinity_terms=hostname), z1b, [(db, z1a)]) is None


def test_an_existing_pods_term_keeps_an_incoming_pod_out_of_its_domain() -> None:
    z1a, z1b = a_node("z1a", **{ZONE: "z1"}), a_node("z1b", **{ZONE: "z1"})
    db = replace(labelled("db-1", "z1a", app="cache"), anti_affinity_terms=(NOT_WITH_DB[0]._replace(namespaces=None),))
    incoming = labelled("db-2", "elsewhere", ns="data", app="db")
    assert anti_affinity_problem(incoming, z1b, [(db, z1a)]) == (
        f"the anti-affinity of app/db-1 on node z1a ({ZONE}=z1) excludes it"
    )


def test_a_node_without_the_topology_label_is_in_no_domain_either_way() -> None:
    # kube-scheduler counts a term only on nodes with its topology label
    z1a, bare = a_node("z1a", **{ZONE: "z1"}), a_node("bare")
    web = replace(labelled("web-1", "x", app="web"), anti_affinity_terms=NOT_WITH_DB)
    db = labelled("db-1", "z1a", app="db")
    assert anti_affinity_problem(web, bare, [(db, z1a)]) is None
    holder = replace(labelled("db-1", "bare", app="cache"), anti_affinity_terms=(NOT_WITH_DB[0],))
    assert anti_affinity_problem(labelled("db-2", "x", app="db"), z1a, [(holder, bare)]) is None
    blank_a, blank_b = a_node("blank-a", **{ZONE: ""}), a_node("blank-b", **{ZONE: ""})  # "" is a value
    assert anti_affinity_problem(web, blank_b, [(replace(db, node="blank-a"), blank_a)]) is not None


def test_a_pod_is_not_its_own_neighbour() -> None:
    z1a, z1b = a_node("z1a", **{ZONE: "z1"}), a_node("z1b", **{ZONE: "z1"})
    own = (PodAffinityTerm(LabelSelector((("app", "db"),)), (), ZONE),)
    db = replace(labelled("db-1", "z1a", app="db"), anti_affinity_terms=own)
    assert anti_affinity_problem(db, z1b, [(db, z1a)]) is None  # its old copy is evicted


@pytest.mark.parametrize(
    ("mine", "theirs", "clash"),
    [
        (HostPort(9100), HostPort(9100), True),
        (HostPort(9100), HostPort(9101), False),
        (HostPort(9100, "UDP"), HostPort(9100), False),
        (HostPort(9100, "UDP"), HostPort(9100, "UDP"), True),
        (HostPort(9100, "TCP", "10.0.0.1"), HostPort(9100, "TCP", "10.0.0.2"), False),
        (HostPort(9100, "TCP", "10.0.0.1"), HostPort(9100, "TCP", "10.0.0.1"), True),
        (HostPort(9100, "TCP", "10.0.0.1"), HostPort(9100, "TCP", "0.0.0.0"), True),  # noqa: S104
        (HostPort(9100, "TCP", ""), HostPort(9100, "TCP", "10.0.0.2"), True),
        (HostPort(9100, "TCP", "::"), HostPort(9100, "TCP", "10.0.0.2"), True),  # read as every address
        (HostPort(0), HostPort(0), False),
    ],
)
def test_host_ports_clash_on_the_same_port_protocol_and_an_overlapping_address(
    mine: HostPort, theirs: HostPort, clash: bool
) -> None:
    assert ports_overlap(mine, theirs) is clash
    assert ports_overlap(theirs, mine) is clash


def test_a_host_port_keeps_a_pod_off_a_node_where_another_pod_binds_it_only() -> None:
    n1, n2 = a_node("n1"), a_node("n2")
    exporter = replace(labelled("exporter-n1", "n1", app="exporter"), host_ports=(HostPort(9100),))
    web = replace(labelled("web-1", "n2", app="web"), host_ports=(HostPort(9100),))
    assert neighbour_problem(web, n1, [(exporter, n1)]) == "app/exporter-n1 on node n1 binds its host port 9100/TCP"
    assert neighbour_problem(web, n2, [(exporter, n1)]) is None
