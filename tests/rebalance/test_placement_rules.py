"""fits_node: a pod's node selector, required node affinity and tolerations, as kube-scheduler reads them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rebalance_builders import pod

from planner.placement_rules import fits_node, node_fit_problem, tolerates
from scaleahead.types import Node, NodeSelectorRequirement, Pod, Taint, Toleration

R = NodeSelectorRequirement


def a_node(name: str = "n1", labels: dict[str, str] | None = None, taints: tuple[Taint, ...] = ()) -> Node:
    return Node(name, 8000, 8000, labels or {}, taints=taints)


def with_rules(
    selector: dict[str, str] | None = None,
    terms: tuple[tuple[NodeSelectorRequirement, ...], ...] = (),
    tolerations: tuple[Toleration, ...] = (),
) -> Pod:
    p = pod("web-1", "n0", 500)
    return Pod(
        p.namespace,
        p.name,
        p.node,
        p.cpu_request_m,
        p.memory_request_mb,
        p.owner,
        node_selector=selector or {},
        required_node_terms=terms,
        tolerations=tolerations,
    )


def test_a_pod_without_rules_fits_any_untainted_node() -> None:
    assert fits_node(pod("web-1", "n0", 500), a_node(labels={"zone": "a"}))
    assert node_fit_problem(pod("web-1", "n0", 500), a_node()) is None


def test_the_node_selector_needs_every_label_with_its_value() -> None:
    p = with_rules({"disk": "ssd", "zone": "a"})
    assert fits_node(p, a_node(labels={"disk": "ssd", "zone": "a", "other": "x"}))
    assert not fits_node(p, a_node(labels={"disk": "ssd"}))
    assert not fits_node(p, a_node(labels={"disk": "hdd", "zone": "a"}))
    assert node_fit_problem(p, a_node(labels={"disk": "hdd", "zone": "a"})) == (
        "its nodeSelector disk=ssd does not match node n1"
    )


@pytest.mark.parametrize(
    ("req", "labels", "fits"),
    [
        (R("zone", "In", ("a", "b")), {"zone": "b"}, True),
        (R("zone", "In", ("a", "b")), {"zone": "c"}, False),
        (R("zone", "In", ("a",)), {}, False),
        (R("zone", "NotIn", ("a",)), {"zone": "b"}, True),
        (R("zone", "NotIn", ("a",)), {}, True),
        (R("zone", "NotIn", ("a",)), {"zone": "a"}, False),
        (R("gpu", "Exists"), {"gpu": ""}, True),
        (R("gpu", "Exists"), {}, False),
        (R("gpu", "DoesNotExist"), {}, True),
        (R("gpu", "DoesNotExist"), {"gpu": "x"}, False),
        (R("cores", "Gt", ("8",)), {"cores": "16"}, True),
        (R("cores", "Gt", ("8",)), {"cores": "8"}, False),
        (R("cores", "Gt", ("8",)), {"cores": "10a"}, False),  # not an integer: no match
        (R("cores", "Gt", ("8",)), {}, False),
        (R("cores", "Gt", ("x",)), {"cores": "16"}, False),
        (R("cores", "Gt", ("8", "9")), {"cores": "16"}, False),  # Gt takes exactly one value
        (R("cores", "Gt", ("9",)), {"cores": "10"}, True),  # as numbers, not as text ("10" < "9")
        (R("cores", "Lt", ("9",)), {"cores": "10"}, False),
        (R("cores", "Lt", ("-1",)), {"cores": "-5"}, True),
        (R("cores", "Lt", ("1",)), {"cores": "+0"}, True),
        (R("cores", "Gt", ("1",)), {"cores": "99999999999999999999"}, False),  # beyond int64
        (R("cores", "Gt", ("1",)), {"cores": " 5"}, False),
        (R("zone", "Matches", ("a",)), {"zone": "a"}, False),  # unknown operator
    ],
)
def test_required_node_affinity_operators(req: NodeSelectorRequirement, labels: dict[str, str], fits: bool) -> None:
    assert fits_node(with_rules(terms=((req,),)), a_node(labels=labels)) is fits


def test_terms_are_ored_and_their_requirements_anded() -> None:
    ssd_in_a = (R("disk", "In", ("ssd",)), R("zone", "In", ("a",)))
    gpu = (R("gpu", "Exists"),)
    p = with_rules(terms=(ssd_in_a, gpu))
    assert fits_node(p, a_node(labels={"disk": "ssd", "zone": "a"}))
    assert fits_node(p, a_node(labels={"gpu": "1"}))
    assert not fits_node(p, a_node(labels={"disk": "ssd", "zone": "b"}))  # the first term half-matches
    assert node_fit_problem(p, a_node(labels={"zone": "a"})) == (
        "no term of its required node affinity matches node n1"
    )


def test_an_empty_term_matches_no_node() -> None:
    assert not fits_node(with_rules(terms=((),)), a_node())
    assert fits_node(with_rules(terms=((), (R("zone", "Exists"),))), a_node(labels={"zone": "a"}))


def test_match_fields_read_the_node_name() -> None:
    only_n2 = with_rules(terms=((R("metadata.name", "In", ("n2",), field=True),),))
    assert fits_node(only_n2, a_node("n2")) and not fits_node(only_n2, a_node("n1"))
    not_n2 = with_rules(terms=((R("metadata.name", "NotIn", ("n2",), field=True),),))
    assert fits_node(not_n2, a_node("n1")) and not fits_node(not_n2, a_node("n2"))
    # a field is not a label: a label named metadata.name does not stand in for the node's name
    assert not fits_node(only_n2, Node("n1", 8000, 8000, {"metadata.name": "n2"}))
    unknown = with_rules(terms=((R("spec.unschedulable", "NotIn", ("true",), field=True),),))
    assert not fits_node(unknown, a_node())


def test_node_selector_and_affinity_must_both_hold() -> None:
    p = with_rules({"disk": "ssd"}, terms=((R("zone", "In", ("a",)),),))
    assert fits_node(p, a_node(labels={"disk": "ssd", "zone": "a"}))
    assert not fits_node(p, a_node(labels={"disk": "ssd", "zone": "b"}))
    assert not fits_node(p, a_node(labels={"zone": "a"}))


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), Taint("dedicated", "gpu", "NoSchedule"), True),
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), Taint("dedicated", "db", "NoSchedule"), False),
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), Taint("dedicated", "gpu", "NoExecute"), False),
        (Toleration("dedicated", "Equal", "gpu", ""), Taint("dedicated", "gpu", "NoExecute"), True),  # any effect
        (Toleration("dedicated", "", "gpu", ""), Taint("dedicated", "gpu", "NoSchedule"), True),  # "" is Equal
        (Toleration("dedicated", "Exists", "", ""), Taint("dedicated", "anything", "NoExecute"), True),
        (Toleration("dedicated", "Exists", "", ""), Taint("other", "", "NoSchedule"), False),
        (Toleration("", "Exists", "", ""), Taint("anything", "x", "NoExecute"), True),  # tolerates everything
        (Toleration("", "Exists", "", "NoSchedule"), Taint("anything", "x", "NoExecute"), False),
        (Toleration("dedicated", "Gt", "1", ""), Taint("dedicated", "2", "NoSchedule"), False),  # unknown operator
    ],
)
def test_a_toleration_matches_a_taint_as_kubernetes_does(toleration: Toleration, taint: Taint, tolerated: bool) -> None:
    assert tolerates(toleration, taint) is tolerated
    assert fits_node(with_rules(tolerations=(toleration,)), a_node(taints=(taint,))) is tolerated


def test_every_no_schedule_and_no_execute_taint_must_be_tolerated_and_prefer_no_schedule_is_not_a_filter() -> None:
    gpu = Taint("dedicated", "gpu", "NoSchedule")
    draining = Taint("maintenance", "", "NoExecute")
    node = a_node(taints=(gpu, draining, Taint("spot", "true", "PreferNoSchedule")))
    both = with_rules(tolerations=(Toleration("dedicated", "Equal", "gpu"), Toleration("maintenance", "Exists")))
    assert fits_node(both, node)
    one = with_rules(tolerations=(Toleration("dedicated", "Equal", "gpu"),))
    assert node_fit_problem(one, node) == "it does not tolerate node n1's taint maintenance:NoExecute"
    assert not fits_node(pod("web-1", "n0", 500), node)
    assert fits_node(pod("web-1", "n0", 500), a_node(taints=(Taint("spot", "true", "PreferNoSchedule"),)))


EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
LABELS = st.dictionaries(st.sampled_from(["zone", "disk", "gpu"]), st.sampled_from(["a", "b", "1", "12"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(LABELS, LABELS)
def test_a_node_selector_fits_exactly_the_nodes_whose_labels_include_it(
    selector: dict[str, str], labels: dict[str, str]
) -> None:
    assert fits_node(with_rules(selector), a_node(labels=labels)) is (selector.items() <= labels.items())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["k1", "k2", ""]), st.sampled_from(["v", ""]), st.sampled_from(EFFECTS)),
        max_size=4,
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["k1", "k2", ""]),
            st.sampled_from(["Equal", "Exists", ""]),
            st.sampled_from(["v", ""]),
            st.sampled_from(["", *EFFECTS]),
        ),
        max_size=3,
    ),
)
def test_taints_filter_only_with_no_schedule_and_no_execute_and_a_blanket_toleration_passes_all(
    taints: list[tuple[str, str, str]], tolerations: list[tuple[str, str, str, str]]
) -> None:
    node = a_node(taints=tuple(Taint(*t) for t in taints))
    pods_tolerations = tuple(Toleration(*t) for t in tolerations)
    expected = all(
        t.effect == "PreferNoSchedule" or any(tolerates(x, t) for x in pods_tolerations) for t in node.taints
    )
    assert fits_node(with_rules(tolerations=pods_tolerations), node) is expected
    assert fits_node(with_rules(tolerations=(*pods_tolerations, Toleration("", "Exists"))), node)
    if not node.taints or all(t.effect == "PreferNoSchedule" for t in node.taints):
        assert fits_node(with_rules(), node)
