#!/bin/sh
# A self-signed CA and a serving certificate for the pod steering webhook, for clusters without
# cert-manager (with cert-manager, deploy/components/webhook-cert-manager does this instead).
#
#   deploy/webhook/gen-cert.sh OUTDIR [SERVICE] [NAMESPACE] [DAYS]
#
# writes OUTDIR/ca.crt, OUTDIR/tls.crt and OUTDIR/tls.key (for SERVICE.NAMESPACE.svc, default
# scaleahead-webhook.scaleahead-system.svc, valid DAYS days, default 365) and prints the two
# commands that install them: the Secret the controller mounts and the caBundle the API server
# uses to trust the webhook. Re-run and re-apply before the certificate expires.
set -eu
out=${1:?usage: gen-cert.sh OUTDIR [SERVICE] [NAMESPACE] [DAYS]}
svc=${2:-scaleahead-webhook}
ns=${3:-scaleahead-system}
days=${4:-365}
mkdir -p "$out"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=scaleahead-webhook-ca" \
  -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$svc.$ns.svc" \
  -keyout "$out/tls.key" -out "$out/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
  "$svc" "$svc" "$ns" "$svc" "$ns" "$svc" "$ns" > "$out/ext.cnf"
openssl x509 -req -in "$out/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -extfile "$out/ext.cnf" -out "$out/tls.crt" 2>/dev/null
rm -f "$out/tls.csr" "$out/ext.cnf" "$out/ca.srl"
chmod 644 "$out/ca.crt" "$out/tls.crt"
cat <<MSG
Wrote $out/ca.crt, $out/tls.crt, $out/tls.key (CA key: $out/ca.key, keep it or delete it).
Install:
  kubectl -n $ns create secret tls scaleahead-webhook-tls --cert=$out/tls.crt --key=$out/tls.key
  kubectl patch mutatingwebhookconfiguration scaleahead-pod-steering --type=json \\
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"\$(base64 -w0 < $out/ca.crt)\"}]"
MSG
