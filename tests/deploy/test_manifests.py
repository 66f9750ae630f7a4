"""deploy/: every overlay renders and validates offline, the generated files are up to date, RBAC is
least privilege, the security context is restrictive and the dashboard uses metrics that exist."""

from __future__ import annotations

import ast
import inspect
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from scaleahead.configdoc import configuration_markdown
from scaleahead.crd import crd, crd_yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = ["base", "overlays/dev", "overlays/prod"]
VALIDATE = Path(sys.executable).parent / "kubernetes-validate"


def render(overlay: str) -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is needed to render the kustomize overlays (it is on the project's machine image).")
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / overlay)], capture_output=True, text=True, check=True, timeout=60
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_passes_strict_validation(overlay: str) -> None:
    text = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / overlay)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    res = subprocess.run(
        [str(VALIDATE), "--strict", "--quiet", "-"], input=text, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ERROR" not in res.stdout
    # Only the Prometheus Operator's ServiceMonitor and PrometheusRule (tests/deploy/test_alerts.py
    # checks the rules with promtool) and cert-manager's Issuer and Certificate (prod's webhook
    # certificate) have no bundled schema; nothing else is skipped.
    skipped = [line for line in res.stdout.splitlines() if "Couldn't find schema" in line]
    assert all(
        "kind ServiceMonitor " in line
        or "kind PrometheusRule " in line
        or ("cert-manager.io/v1" in line and ("Issuer" in line or "Certificate" in line))
        for line in skipped
    ), skipped


def test_strict_validation_rejects_an_unknown_field() -> None:
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"portz": []}}
    res = subprocess.run(
        [str(VALIDATE), "--strict", "--quiet", "-"], input=yaml.safe_dump(bad), capture_output=True, text=True
    )
    assert res.returncode != 0


def test_the_committed_crd_is_the_generated_one() -> None:
    assert (DEPLOY / "base" / "crd.yaml").read_text() == crd_yaml(), "run: scaleahead crd --output deploy/base/crd.yaml"


def test_the_committed_configuration_doc_is_the_generated_one() -> None:
    committed = (REPO / "docs" / "configuration.md").read_text()
    assert committed == configuration_markdown(), "run: scaleahead config-doc --output docs/configuration.md"


def test_crd_has_cel_rules_and_a_status_subresource() -> None:
    version = crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert any("self.minReplicas" in r and "<=" in r and "self.maxReplicas" in r for r in rules)
    assert any("staticReplicas" in r for r in rules)
    assert any("startupLearning.minSamples" in r and "<=" in r and "startupLearning.window" in r for r in rules)
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"forecastPeak", "desiredReplicas", "lastReason", "fallbackMode"} <= status.keys()


def _column(obj: dict[str, Any], path: str) -> Any:
    """What ``kubectl get`` shows for a printer column's JSONPath: a dotted path, or a condition's field."""
    if m := re.fullmatch(r'\.status\.conditions\[\?\(@\.type=="(\w+)"\)\]\.(\w+)', path):
        found = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == m.group(1)]
        return found[0].get(m.group(2)) if found else None
    node: Any = obj
    for key in path.strip(".").split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def test_kubectl_get_pspol_shows_the_reason_code_of_each_policy() -> None:
    """``kubectl get pspol`` had no reason: Desired 14 and Current 3 with Accepted True said nothing of a
    change a GitOps tool kept undoing, nor a refused policy's or an unreadable target's why (obsaudit F11)."""
    from actuator.policy_resources import Rejected
    from scaleahead.daemon import PolicyStatus

    committed = yaml.safe_load((DEPLOY / "base" / "crd.yaml").read_text())
    columns = committed["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns][-2:] == ["Reason", "Age"], columns  # Age last, as kubectl shows
    (reason,) = [c for c in columns if c["name"] == "Reason"]
    assert reason["type"] == "string" and reason.get("priority", 0) == 0, "shown without -o wide"
    held = PolicyStatus(
        "web", "shop", "Deployment/shop/web", 14, 3, 27.5, "none", "not applied: human edit: ...", "co_writer", 0.0, "m"
    )
    statuses = {
        "co_writer": held.to_status(),
        "policy_rejected": Rejected("web", "shop", "DuplicateTarget", "another policy ...").to_status(),
    }
    for code, status in statuses.items():
        obj = {"metadata": {"name": "web"}, "spec": {"target": {"name": "web"}}, "status": status}
        assert _column(obj, reason["jsonPath"]) == code
    shown = {c["name"]: _column({"status": statuses["co_writer"]}, c["jsonPath"]) for c in columns}
    assert (shown["Desired"], shown["Current"], shown["Reason"]) == (14, 3, "co_writer"), shown


def _crd_validator() -> jsonschema.Draft4Validator:
    # OpenAPI v3.0 (boolean exclusiveMinimum) is JSON schema draft 4 for these keywords.
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return jsonschema.Draft4Validator(schema)


def test_the_example_policy_is_valid_under_the_crd_schema() -> None:
    example = yaml.safe_load((REPO / "examples" / "policy.yaml").read_text())
    errors = list(_crd_validator().iter_errors(example["spec"]))
    assert errors == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"capacityPerReplica": 0}, "capacityPerReplica"),
        ({"targetUtilization": 1.5}, "targetUtilization"),
        ({"fallback": {"mode": "sometimes"}}, "mode"),
        ({"minReplicas": -1}, "minReplicas"),
        ({"startupLearning": {"quantile": 0}}, "quantile"),
        ({"startupLearning": {"minSamples": 0}}, "minSamples"),
    ],
)
def test_the_crd_schema_rejects_what_the_policy_schema_rejects(change: dict[str, Any], field: str) -> None:
    spec = yaml.safe_load((REPO / "examples" / "policy.yaml").read_text())["spec"]
    spec.update(change)
    errors = list(_crd_validator().iter_errors(spec))
    assert errors, f"{change} should be rejected"
    assert any(field in "/".join(str(p) for p in e.absolute_path) for e in errors)


# -- RBAC ----------------------------------------------------------------------------------------
#: (api group, resource, verb) the controller needs: the scale targets, HPA floors, Knative
#: min-scale, pod moves through the Eviction API, its own CRD and status, and the leader Lease.
EXPECTED_CLUSTER_RULES = {
    ("apps", "deployments", "get"),
    ("apps", "deployments", "list"),
    ("apps", "statefulsets", "get"),
    ("apps", "statefulsets", "list"),
    ("apps", "deployments/scale", "get"),
    ("apps", "deployments/scale", "patch"),
    ("apps", "statefulsets/scale", "get"),
    ("apps", "statefulsets/scale", "patch"),
    ("autoscaling", "horizontalpodautoscalers", "get"),
    ("autoscaling", "horizontalpodautoscalers", "list"),
    ("autoscaling", "horizontalpodautoscalers", "patch"),
    ("serving.knative.dev", "services", "get"),
    ("serving.knative.dev", "services", "patch"),
    ("", "pods", "list"),
    ("", "resourcequotas", "list"),
    ("", "limitranges", "list"),
    ("node.k8s.io", "runtimeclasses", "get"),
    ("scaleahead.io", "predictivescalingpolicies", "list"),
    ("scaleahead.io", "predictivescalingpolicies/status", "patch"),
}
#: The optional component deploy/components/headroom: writing the headroom placeholder Deployment
#: (a patch on Deployments could change any pod template, so the base does not grant it).
HEADROOM_RULES = {
    ("apps", "deployments", "create"),
    ("apps", "deployments", "patch"),
}
#: The optional component deploy/components/rebalance: what pod moves need (an audit found the base
#: granting pod create and delete in every namespace, and serving the steering webhook, with
#: rebalancing off by default).
REBALANCE_RULES = {
    ("", "pods", "get"),
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "pods/eviction", "create"),
    ("policy", "poddisruptionbudgets", "list"),
    ("", "nodes", "list"),
    ("", "nodes", "get"),
    ("", "nodes", "patch"),
    ("metrics.k8s.io", "pods", "list"),
}
EXPECTED_NAMESPACE_RULES = {
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "patch"),
    ("", "configmaps", "get"),
}
#: Rules for objects the typed client reaches through CustomObjectsApi (group and plural are
#: arguments there, so the scanner cannot name them): Knative Services and our own policies.
CUSTOM_OBJECT_RULES = {
    ("serving.knative.dev", "services", "get"),
    ("serving.knative.dev", "services", "patch"),
    ("scaleahead.io", "predictivescalingpolicies", "list"),
    ("scaleahead.io", "predictivescalingpolicies/status", "patch"),
    ("metrics.k8s.io", "pods", "list"),
}


def _triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_rbac_grants_exactly_the_expected_verbs_and_nothing_wild() -> None:
    docs = render("base")
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    cluster_role, retrain_role = roles["scaleahead"], roles["scaleahead-retrain"]
    (role,) = by_kind(docs, "Role")
    assert _triples(retrain_role["rules"]) == {("scaleahead.io", "predictivescalingpolicies", "list")}
    assert _triples(cluster_role["rules"]) == EXPECTED_CLUSTER_RULES
    assert _triples(role["rules"]) == EXPECTED_NAMESPACE_RULES
    for rule in cluster_role["rules"] + role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    assert not any(r == "secrets" for _, r, _ in _triples(cluster_role["rules"]))
    assert role["metadata"]["namespace"] == "scaleahead-system"
    from scaleahead.settings import ActuationSettings

    # the kill switch's ConfigMap only, by the name the setting has by default
    (configmaps,) = [r for r in role["rules"] if r["resources"] == ["configmaps"]]
    assert configmaps["resourceNames"] == [ActuationSettings().kill_switch_configmap]


_VERBS = {
    "read": "get",
    "get": "get",
    "list": "list",
    "patch": "patch",
    "replace": "update",
    "create": "create",
    "delete": "delete",
}


def _api_calls() -> Iterator[tuple[str, str, str, str]]:
    """(file, group, resource, verb) for every typed Kubernetes client call in the code base."""
    for path, _, group, resource, verb in _api_calls_by_function():
        yield path, group, resource, verb


def _api_calls_by_function() -> Iterator[tuple[str, str, str, str, str]]:
    """(file, group, resource, verb) for every typed Kubernetes client call in the code base.

    The resource and group come from the client method's own request path, so the mapping is the
    client's, not ours. ``CustomObjectsApi`` calls name their group and plural in arguments and
    are checked against the literal strings of the calling module.
    """
    from kubernetes import client

    apis = {name: getattr(client, name) for name in dir(client) if name.endswith("Api") and name[0].isupper()}
    methods: dict[str, Any] = {}
    for api in apis.values():
        for name in dir(api):
            if name.startswith("_") and name.endswith("_serialize"):  # kubernetes >= 35: path lives here
                methods[name.removeprefix("_").removesuffix("_serialize")] = getattr(api, name)
            elif not name.startswith("_") and name.endswith("_with_http_info"):
                methods.setdefault(name.removesuffix("_with_http_info"), getattr(api, name))
    for path in sorted([*REPO.glob("actuator/**/*.py"), *REPO.glob("scaleahead/**/*.py")]):
        tree = ast.parse(path.read_text())
        where: dict[int, str] = {}  # each node's innermost enclosing function ("" at module level)
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(fn):
                    where[id(inner)] = fn.name  # an inner function's own walk comes later: it wins
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in methods and "_" in node.attr:
                src = inspect.getsource(methods[node.attr])
                m = re.search(r"'(/apis?/[^']+)'", src)
                if m is None:
                    continue
                url = m.group(1)
                verb = _VERBS.get(node.attr.split("_", 1)[0])
                if verb is None:
                    continue
                function = where.get(id(node), "")
                if "{group}" in url:  # custom objects: group and plural are arguments
                    yield str(path), function, "<custom>", "status" if "status" in node.attr else "", verb
                    continue
                parts = [p for p in url.split("/") if p and not p.startswith("{")]
                group = "" if parts[0] == "api" else parts[1]
                tail = parts[3:] if parts[0] == "apis" else parts[2:]
                tail = [p for p in tail if p != "namespaces"]
                resource = "/".join(tail)
                yield str(path), function, group, resource, verb


def test_every_kubernetes_api_call_in_the_code_is_allowed_by_rbac() -> None:
    allowed = EXPECTED_CLUSTER_RULES | EXPECTED_NAMESPACE_RULES | HEADROOM_RULES | REBALANCE_RULES
    missing = []
    for path, group, resource, verb in _api_calls():
        if group == "<custom>":
            want_status = resource == "status"
            if not any((r.endswith("/status") == want_status) and v == verb for _, r, v in CUSTOM_OBJECT_RULES):
                missing.append((path, "custom object", verb))
        elif (group, resource, verb) not in allowed:
            missing.append((path, f"{group}/{resource}", verb))
    assert missing == [], f"API calls without an RBAC rule: {missing}"


#: The functions of the move path (actuator/kubernetes.py), the only ones that may call what only
#: the rebalance component grants: the placement read with the pods' usage, a move's live pod, the
#: move itself and the check that its eviction landed.
MOVE_PATH = {"read_placement", "_pod_usage", "_live_pod", "_move", "_evicted", "_fence_patch", "_read_fences"}


def test_only_the_move_path_calls_what_only_the_rebalance_component_grants() -> None:
    """Without the component (rebalancing off, the default) those calls are forbidden: any other
    function calling one would fail in a cluster with the shipped base."""
    outside = [
        (Path(path).name, function, group, resource, verb)
        for path, function, group, resource, verb in _api_calls_by_function()
        if (group, resource, verb) in REBALANCE_RULES - EXPECTED_CLUSTER_RULES and function not in MOVE_PATH
    ]
    assert outside == []
    custom = [
        (Path(path).name, function)
        for path, function, group, _, verb in _api_calls_by_function()
        if group == "<custom>" and verb == "list" and function == "_pod_usage"
    ]
    assert custom, "the pod metrics list (metrics.k8s.io) is made by _pod_usage"


def test_the_headroom_component_grants_the_placeholder_writes_and_its_priority_class(tmp_path: Path) -> None:
    """Found by a coexistence audit: the base granted create and patch on every Deployment for a
    placeholder no policy can ask for yet. The base grants neither now; the component does."""
    assert not any(
        r[:2] == ("apps", "deployments") and r[2] not in ("get", "list") for r in _triples(_cluster_rules("base"))
    )
    assert not by_kind(render("base"), "PriorityClass")
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "deploy" / "overlays" / "with-headroom"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../../base]\ncomponents: [../../components/headroom]\n"
    )
    out = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, check=True, timeout=60)
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    assert _triples(roles["scaleahead-headroom"]["rules"]) == HEADROOM_RULES
    (binding,) = [b for b in by_kind(docs, "ClusterRoleBinding") if b["metadata"]["name"] == "scaleahead-headroom"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "scaleahead", "namespace": "scaleahead-system"}]
    (pc,) = by_kind(docs, "PriorityClass")
    assert (pc["metadata"]["name"], pc["value"], pc["preemptionPolicy"]) == ("scaleahead-headroom", -10, "Never")


def _cluster_rules(overlay: str) -> list[dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in by_kind(render(overlay), "ClusterRole")}["scaleahead"]["rules"]


def test_every_rbac_rule_is_used_by_some_api_call_in_the_code() -> None:
    calls = set()
    custom_verbs = set()
    for _, group, resource, verb in _api_calls():
        if group == "<custom>":
            custom_verbs.add((resource == "status", verb))
        else:
            calls.add((group, resource, verb))
    typed = (EXPECTED_CLUSTER_RULES | EXPECTED_NAMESPACE_RULES | REBALANCE_RULES) - CUSTOM_OBJECT_RULES
    assert typed - calls == set(), "rules no typed API call needs"
    for _, resource, verb in CUSTOM_OBJECT_RULES:
        assert (resource.endswith("/status"), verb) in custom_verbs, f"no custom-object call uses {resource} {verb}"


def test_the_api_call_scanner_maps_client_methods_to_rbac_triples(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "repo"
    (fake / "actuator").mkdir(parents=True)
    (fake / "actuator" / "k.py").write_text(
        "def f(apps, core, co, coord):\n"
        "    apps.patch_namespaced_deployment_scale('web', 'ns', {})\n"
        "    core.create_namespaced_pod_eviction('p', 'ns', {})\n"
        "    coord.replace_namespaced_lease('l', 'ns', {})\n"
        "    apps.read_namespaced_stateful_set('s', 'ns')\n"
        "    co.patch_namespaced_custom_object_status('g', 'v', 'ns', 'p', 'n', {})\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", fake)
    calls = {(g, r, v) for _, g, r, v in _api_calls()}
    assert calls == {
        ("apps", "deployments/scale", "patch"),
        ("", "pods/eviction", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("apps", "statefulsets", "get"),
        ("<custom>", "status", "patch"),
    }


# -- the pod's security context -------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_non_root_read_only_without_capabilities(overlay: str) -> None:
    docs = render(overlay)
    pods = [d["spec"]["template"]["spec"] for d in by_kind(docs, "Deployment")]
    pods += [d["spec"]["jobTemplate"]["spec"]["template"]["spec"] for d in by_kind(docs, "CronJob")]
    assert pods
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]


def test_prod_runs_two_replicas_on_postgresql_and_dev_one_on_sqlite() -> None:
    (prod,) = by_kind(render("overlays/prod"), "Deployment")
    (dev,) = by_kind(render("overlays/dev"), "Deployment")
    assert prod["spec"]["replicas"] == 2
    assert dev["spec"]["replicas"] == 1

    def env(dep: dict[str, Any]) -> dict[str, Any]:
        return {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert env(prod)["SCALEAHEAD_DB_URL"]["valueFrom"]["secretKeyRef"]["name"] == "scaleahead-db"
    assert env(dev)["SCALEAHEAD_DB_URL"]["value"].startswith("sqlite:////var/lib/scaleahead/")
    volumes = {v["name"]: v for v in dev["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "scaleahead-data"}}
    assert by_kind(render("overlays/dev"), "PersistentVolumeClaim")


def test_base_has_every_object_a_platform_team_needs() -> None:
    kinds = {d["kind"] for d in render("base")}
    assert {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "CronJob",
    } <= kinds


def test_the_deployment_probes_the_health_endpoints_the_daemon_serves() -> None:
    (dep,) = by_kind(render("base"), "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["args"][0] == "run"
    assert not any(a.startswith("--policies") for a in c["args"]), "in a cluster policies are custom resources"


# -- rebalancing and the pod steering webhook: the optional component ---------------------------------
#: prod with rebalancing on and the webhook's certificate from cert-manager, as docs/operations.md says
REBALANCED = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../prod]\n"
    "components: [../../components/rebalance, ../../components/webhook-cert-manager]\n"
)


@pytest.fixture(scope="module")
def rebalanced(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The prod overlay with deploy/components/rebalance and webhook-cert-manager, rendered and
    validated strictly (cert-manager's objects have no bundled schema)."""
    from tests.deploy.test_webhook_client_auth import build

    return build(tmp_path_factory.mktemp("rebalanced"), REBALANCED)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_without_the_component_nothing_is_moved_evicted_or_steered(overlay: str) -> None:
    """Rebalancing is off by default (loop.max_moves 0): the base and the shipped overlays grant no
    pod get, create or delete, no eviction, no node, budget or pod-metrics read, serve no webhook
    and open no port for one."""
    docs = render(overlay)
    granted = set().union(*(_triples(r["rules"]) for r in by_kind(docs, "ClusterRole")))
    assert granted & REBALANCE_RULES == set()
    assert not by_kind(docs, "MutatingWebhookConfiguration")
    (dep,) = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    env = {e["name"] for e in pod["containers"][0]["env"]}
    assert not {"SCALEAHEAD_LOOP__MAX_MOVES", "SCALEAHEAD_WEBHOOK__ENABLED"} & env
    assert [p["containerPort"] for p in pod["containers"][0]["ports"]] == [8080]
    assert "webhook-tls" not in {v["name"] for v in pod["volumes"]}
    (policy,) = by_kind(docs, "NetworkPolicy")[:1]
    assert {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])} == {8080}


def test_the_rebalance_component_grants_the_moves_and_turns_them_on(rebalanced: list[dict[str, Any]]) -> None:
    roles = {r["metadata"]["name"]: r for r in by_kind(rebalanced, "ClusterRole")}
    assert _triples(roles["scaleahead-rebalance"]["rules"]) == REBALANCE_RULES
    assert _triples(roles["scaleahead"]["rules"]) == EXPECTED_CLUSTER_RULES
    (binding,) = [
        b for b in by_kind(rebalanced, "ClusterRoleBinding") if b["metadata"]["name"] == "scaleahead-rebalance"
    ]
    assert binding["roleRef"]["name"] == "scaleahead-rebalance"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "scaleahead", "namespace": "scaleahead-system"}]
    (dep,) = by_kind(rebalanced, "Deployment")
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    from scaleahead.settings import Settings

    assert (
        Settings.from_env({"SCALEAHEAD_LOOP__MAX_MOVES": env["SCALEAHEAD_LOOP__MAX_MOVES"]["value"]}).loop.max_moves > 0
    )
    # the prod overlay's own settings are kept (the component's patch merges, it does not replace)
    assert env["SCALEAHEAD_DB_URL"]["valueFrom"]["secretKeyRef"]["name"] == "scaleahead-db"
    # every object carries the label the base gives its own (it does not reach a component's)
    unlabelled = [
        (d["kind"], d["metadata"]["name"])
        for d in rebalanced
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of") != "scaleahead"
    ]
    assert unlabelled == []


def test_the_steering_webhook_never_blocks_pods_and_only_sees_controller_owned_pods(
    rebalanced: list[dict[str, Any]],
) -> None:
    docs = rebalanced
    (config,) = by_kind(docs, "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["timeoutSeconds"] <= 5
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    excluded = next(
        e["values"] for e in hook["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name"
    )
    assert {"kube-system", "scaleahead-system"} <= set(excluded)
    assert any(e["key"] == "scaleahead.io/headroom" for e in hook["objectSelector"]["matchExpressions"])
    (condition,) = hook["matchConditions"]
    assert "ReplicaSet" in condition["expression"] and "StatefulSet" in condition["expression"]
    from actuator.steering import WEBHOOK_PATH

    service_ref = hook["clientConfig"]["service"]
    assert service_ref["path"] == WEBHOOK_PATH
    service = next(d for d in by_kind(docs, "Service") if d["metadata"]["name"] == service_ref["name"])
    assert service["metadata"]["namespace"] == service_ref["namespace"] == "scaleahead-system"
    (port,) = service["spec"]["ports"]
    assert port["port"] == service_ref["port"] == 443
    (dep,) = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SCALEAHEAD_WEBHOOK__ENABLED"] == "true"
    container_port = next(p["containerPort"] for p in container["ports"] if p["name"] == port["targetPort"])
    assert env["SCALEAHEAD_WEBHOOK__PORT"] == str(container_port)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-tls")
    assert env["SCALEAHEAD_WEBHOOK__CERT_FILE"] == mount["mountPath"] + "/tls.crt"
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    # A missing Secret must not stop the controller: it then runs without the webhook.
    assert volume["secret"] == {"secretName": "scaleahead-webhook-tls", "optional": True}
    (policy,) = by_kind(docs, "NetworkPolicy")[:1]
    assert any(p["port"] == container_port for rule in policy["spec"]["ingress"] for p in rule.get("ports", []))


def test_cert_manager_writes_the_webhook_certificate_into_the_mounted_secret(rebalanced: list[dict[str, Any]]) -> None:
    docs = rebalanced
    (cert,) = by_kind(docs, "Certificate")
    (config,) = by_kind(docs, "MutatingWebhookConfiguration")
    assert cert["spec"]["secretName"] == "scaleahead-webhook-tls"
    ns, name = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    assert (cert["metadata"]["namespace"], cert["metadata"]["name"]) == (ns, name)
    service = config["webhooks"][0]["clientConfig"]["service"]
    assert f"{service['name']}.{service['namespace']}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"]["name"] in {d["metadata"]["name"] for d in by_kind(docs, "Issuer")}


def test_the_openssl_script_makes_a_certificate_for_the_webhook_service(tmp_path: Path) -> None:
    out = subprocess.run(
        ["sh", str(DEPLOY / "webhook" / "gen-cert.sh"), str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    san = subprocess.run(
        ["openssl", "x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "DNS:scaleahead-webhook.scaleahead-system.svc" in san
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "create secret tls scaleahead-webhook-tls" in out.stdout
    assert "scaleahead-pod-steering" in out.stdout


# -- the dashboard ------------------------------------------------------------------------------------
def test_the_grafana_dashboard_only_queries_metrics_the_daemon_exports() -> None:
    from scaleahead.observability import Metrics

    exported = set()
    for metric in Metrics().registry.collect():
        exported.add(metric.name)
        for sample in metric.samples:
            exported.add(sample.name)
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        exported |= {m + suffix for m in list(exported)}
    dash = json.loads((DEPLOY / "grafana" / "scaleahead-dashboard.json").read_text())
    used = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\bscaleahead_[a-z_0-9]+", target["expr"]))
    assert used, "the dashboard queries something"
    assert used <= exported, f"unknown metrics: {used - exported}"


def test_the_dashboards_all_workloads_include_those_without_a_planned_count() -> None:
    """The "All" of the workload variable is every workload, not the values listed (Grafana
    expands it to them without an allValue): a workload whose state or history cannot be read has
    no planned count, and was left out of the very panels that show its errors (until 2026-12-06).
    The list of values comes from metrics such a workload has too (its back-off, its errors)."""
    from scaleahead.observability import Metrics

    dash = json.loads((DEPLOY / "grafana" / "scaleahead-dashboard.json").read_text())
    (var,) = [v for v in dash["templating"]["list"] if v["name"] == "workload"]
    assert var["includeAll"] and var["allValue"] == ".*"
    listed = set(re.findall(r"scaleahead_[a-z_0-9|()]+", var["query"]))
    names = "".join(listed)
    for metric in ("workload_backoff_seconds", "workload_errors_total", "planned_replicas"):
        assert metric in names, var["query"]
    exported = {m.name for m in Metrics().registry.collect()}
    alternatives = re.search(r"scaleahead_\(([a-z_|]+)\)", var["query"])
    assert alternatives is not None
    for name in alternatives.group(1).split("|"):
        assert f"scaleahead_{name}".removesuffix("_total") in exported, name
    # panels for the gauges two alerts are built on, and for the webhook
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p.get("targets", []))
    for metric in (
        "scaleahead_actions_unresolved",
        "scaleahead_webhook_reviews_total",
        "scaleahead_webhook_clients_refused_total",
        "scaleahead_policies_rejected",
        "scaleahead_workload_held",
    ):
        assert metric in exprs, metric


#: Kinds without a namespace (everything else in deploy/ must land in scaleahead-system).
CLUSTER_SCOPED = {
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PriorityClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_namespaced_object_lands_in_scaleahead_system(overlay: str) -> None:
    """`kubectl apply -k` without `-n` (as docs/operations.md says) puts an object without a
    namespace in the context's namespace: found in review, the dev overlay's PVC and the prod
    overlay's PostgreSQL NetworkPolicy landed there (the pod Pending; port 5432 blocked)."""
    stray = [
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace"))
        for d in render(overlay)
        if d["kind"] not in CLUSTER_SCOPED and d["metadata"].get("namespace") != "scaleahead-system"
    ]
    assert stray == []


def test_every_namespaced_object_of_the_components_lands_in_scaleahead_system(rebalanced: list[dict[str, Any]]) -> None:
    """An overlay that adds the components needs no namespace of its own (the webhook's Service had
    none: an overlay's namespace setting does not reach objects it did not set it for)."""
    stray = [
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace"))
        for d in rebalanced
        if d["kind"] not in CLUSTER_SCOPED and d["metadata"].get("namespace") != "scaleahead-system"
    ]
    assert stray == []
