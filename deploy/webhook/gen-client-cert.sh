#!/bin/sh
# A dedicated CA and the client certificate the API server presents to the pod steering webhook,
# so the webhook serves only the API server (webhook.client_ca_file; docs/actuator.md, Steering).
# Without it, anyone who can reach port 8443 can send forged AdmissionReviews.
#
#   deploy/webhook/gen-client-cert.sh OUTDIR [SERVICE] [NAMESPACE] [DAYS] [NODE_DIR]
#
# writes to OUTDIR:
#   client-ca.crt        the CA the webhook trusts (a ConfigMap the controller mounts);
#   apiserver-client.crt, apiserver-client.key
#                        the API server's client certificate (CN scaleahead-webhook-client);
#   webhook-kubeconfig.yaml
#                        the kubeconfig the API server uses for calls to SERVICE.NAMESPACE.svc;
#   admission-config.yaml
#                        the AdmissionConfiguration (--admission-control-config-file) naming it,
# for the webhook Service SERVICE.NAMESPACE.svc (default scaleahead-webhook.scaleahead-system.svc),
# valid DAYS days (default 365), with the files on the control-plane nodes in NODE_DIR (default
# /etc/kubernetes/scaleahead), and prints the steps that install them. The CA key
# (OUTDIR/client-ca.key) signs the next certificate: keep it offline or delete it.
set -eu
out=${1:?usage: gen-client-cert.sh OUTDIR [SERVICE] [NAMESPACE] [DAYS] [NODE_DIR]}
svc=${2:-scaleahead-webhook}
ns=${3:-scaleahead-system}
days=${4:-365}
node_dir=${5:-/etc/kubernetes/scaleahead}
mkdir -p "$out"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=scaleahead-webhook-client-ca" \
  -keyout "$out/client-ca.key" -out "$out/client-ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=scaleahead-webhook-client" \
  -keyout "$out/apiserver-client.key" -out "$out/apiserver-client.csr" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > "$out/ext.cnf"
openssl x509 -req -in "$out/apiserver-client.csr" -CA "$out/client-ca.crt" -CAkey "$out/client-ca.key" \
  -CAcreateserial -days "$days" -extfile "$out/ext.cnf" -out "$out/apiserver-client.crt" 2>/dev/null
rm -f "$out/apiserver-client.csr" "$out/ext.cnf" "$out/client-ca.srl"
# The API server picks the kubeconfig user by the name it calls: SERVICE.NAMESPACE.svc (the
# Service's port is 443; another port would be SERVICE.NAMESPACE.svc:PORT).
cat > "$out/webhook-kubeconfig.yaml" <<YAML
apiVersion: v1
kind: Config
users:
  - name: $svc.$ns.svc
    user:
      client-certificate: $node_dir/apiserver-client.crt
      client-key: $node_dir/apiserver-client.key
YAML
cat > "$out/admission-config.yaml" <<YAML
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $node_dir/webhook-kubeconfig.yaml
YAML
chmod 644 "$out/client-ca.crt" "$out/apiserver-client.crt" "$out/webhook-kubeconfig.yaml" "$out/admission-config.yaml"
cat <<MSG
Wrote $out/client-ca.crt, $out/apiserver-client.crt, $out/apiserver-client.key,
$out/webhook-kubeconfig.yaml, $out/admission-config.yaml (CA key: $out/client-ca.key, keep it offline or delete it).
Install:
  1. On every control-plane node: copy apiserver-client.crt, apiserver-client.key,
     webhook-kubeconfig.yaml and admission-config.yaml to $node_dir, make the folder visible to
     kube-apiserver (a hostPath volume in its static pod) and start it with
       --admission-control-config-file=$node_dir/admission-config.yaml
     (if it already has one, add the MutatingAdmissionWebhook entry to that file instead).
  2. kubectl -n $ns create configmap scaleahead-webhook-client-ca --from-file=ca.crt=$out/client-ca.crt
  3. Add the component deploy/components/webhook-client-auth to the overlay (it sets
     SCALEAHEAD_WEBHOOK__CLIENT_CA_FILE and mounts the ConfigMap).
MSG
