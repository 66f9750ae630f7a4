"""deploy/: restricting who may call the pod steering webhook (security audit, finding 6).

The component deploy/components/webhook-client-auth makes the controller require the API server's
client certificate; deploy/webhook/gen-client-cert.sh makes that certificate, its CA and the API
server's admission configuration; deploy/webhook/networkpolicy-control-plane.yaml is the overlay
patch narrowing port 8443 to the control plane's addresses. Each is rendered with kubectl
kustomize and validated strictly, as tests/deploy/test_manifests.py does for the overlays.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
VALIDATE = Path(sys.executable).parent / "kubernetes-validate"


def build(tmp_path: Path, kustomization: str, *copied: Path) -> list[dict[str, Any]]:
    """Render an overlay ``kustomization`` next to a copy of deploy/, with ``copied`` files beside it,
    after validating the rendered objects strictly."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is needed to render the kustomize overlays (it is on the project's machine image).")
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "deploy" / "overlays" / "under-test"
    overlay.mkdir()
    for f in copied:
        shutil.copy(f, overlay / f.name)
    (overlay / "kustomization.yaml").write_text(kustomization)
    text = subprocess.run(
        ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    res = subprocess.run(
        [str(VALIDATE), "--strict", "--quiet", "-"], input=text, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and "ERROR" not in res.stdout, res.stdout + res.stderr
    return [d for d in yaml.safe_load_all(text) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str = "scaleahead") -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_the_client_auth_component_points_the_controller_at_the_mounted_client_ca(tmp_path: Path) -> None:
    docs = build(
        tmp_path,
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../prod]\ncomponents: [../../components/rebalance, ../../components/webhook-client-auth]\n",
    )
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SCALEAHEAD_WEBHOOK__CLIENT_CA_FILE"] == "/etc/scaleahead/webhook-client-ca/ca.crt"
    # The prod overlay's and the rebalance component's settings are kept (the patch merges, it does
    # not replace).
    assert env["SCALEAHEAD_WEBHOOK__ENABLED"] == "true" and "SCALEAHEAD_DB_URL" in env
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-client-ca")
    assert mount == {"name": "webhook-client-ca", "mountPath": "/etc/scaleahead/webhook-client-ca", "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-client-ca")
    # Missing ConfigMap: the controller runs without serving the webhook (it never serves it unauthenticated).
    assert volume["configMap"] == {"name": "scaleahead-webhook-client-ca", "optional": True}
    assert any(v["name"] == "webhook-tls" for v in pod["volumes"])


def test_the_control_plane_patch_narrows_only_the_webhook_port_to_its_ip_block(tmp_path: Path) -> None:
    docs = build(
        tmp_path,
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../base]\n"
        "components: [../../components/rebalance]\n"
        "patches:\n  - path: networkpolicy-control-plane.yaml\n"
        "    target: {kind: NetworkPolicy, name: scaleahead}\n",
        DEPLOY / "webhook" / "networkpolicy-control-plane.yaml",
    )
    base = yaml.safe_load((DEPLOY / "base" / "networkpolicy.yaml").read_text())
    ingress = one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert ingress[0] == base["spec"]["ingress"][0], "the metrics rule is unchanged"
    assert ingress[1] == {
        "from": [{"ipBlock": {"cidr": "192.0.2.10/32"}}],
        "ports": [{"port": 8443, "protocol": "TCP"}],
    }
    # The base opens no webhook port; the component cannot know the addresses: 8443 from every
    # source, which the patch narrows.
    assert [p["port"] for rule in base["spec"]["ingress"] for p in rule["ports"]] == [8080]
    component = build(
        tmp_path / "plain",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../base]\n"
        "components: [../../components/rebalance]\n",
    )
    assert one(component, "NetworkPolicy")["spec"]["ingress"][1] == {"ports": [{"port": 8443, "protocol": "TCP"}]}


def test_the_client_certificate_script_makes_the_api_servers_certificate_and_admission_configuration(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        ["sh", str(DEPLOY / "webhook" / "gen-client-cert.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    verified = subprocess.run(
        ["openssl", "verify", "-purpose", "sslclient", "-CAfile", tmp_path / "client-ca.crt"]
        + [tmp_path / "apiserver-client.crt"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    admission = yaml.safe_load((tmp_path / "admission-config.yaml").read_text())
    assert (admission["apiVersion"], admission["kind"]) == ("apiserver.config.k8s.io/v1", "AdmissionConfiguration")
    (plugin,) = admission["plugins"]
    assert plugin["name"] == "MutatingAdmissionWebhook"
    assert plugin["configuration"]["kind"] == "WebhookAdmissionConfiguration"
    assert plugin["configuration"]["kubeConfigFile"] == "/etc/kubernetes/scaleahead/webhook-kubeconfig.yaml"
    kubeconfig = yaml.safe_load((tmp_path / "webhook-kubeconfig.yaml").read_text())
    (user,) = kubeconfig["users"]
    # The API server picks the user by the name of the Service it calls (port 443: no port suffix).
    assert user["name"] == "scaleahead-webhook.scaleahead-system.svc"
    assert user["user"] == {
        "client-certificate": "/etc/kubernetes/scaleahead/apiserver-client.crt",
        "client-key": "/etc/kubernetes/scaleahead/apiserver-client.key",
    }
    assert "--admission-control-config-file=/etc/kubernetes/scaleahead/admission-config.yaml" in out.stdout
    assert "create configmap scaleahead-webhook-client-ca --from-file=ca.crt=" in out.stdout
    assert (tmp_path / "apiserver-client.key").stat().st_mode & 0o077 == 0, "the private key is not world-readable"
