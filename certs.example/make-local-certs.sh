#!/usr/bin/env bash
# Makes throwaway credentials for local runs against the mock APNs. Never use them with Apple.
#   certs.example/make-local-certs.sh [OUT_DIR]     (default: certs/, which git ignores)
# Writes:
#   ca.pem, ca-key.pem                  a throwaway certificate authority
#   server.pem, server-key.pem          the mock's TLS certificate for localhost and 127.0.0.1
#   client.pem, client-key.pem          a client certificate for certificate authentication
#   AuthKey_TEST123456.p8               a P-256 signing key in Apple's .p8 format (PKCS#8 PEM)
#   AuthKey_TEST123456.pub.pem          its public key, for mock-apns --auth-key-pub
set -euo pipefail
OUT=${1:-certs}
mkdir -p "$OUT"
cd "$OUT"
umask 077
command -v openssl >/dev/null || { echo "openssl is needed: apt-get install openssl" >&2; exit 1; }

openssl ecparam -name prime256v1 -genkey -noout -out ca-ec.pem
openssl pkcs8 -topk8 -nocrypt -in ca-ec.pem -out ca-key.pem && rm ca-ec.pem
openssl req -x509 -new -key ca-key.pem -sha256 -days 30 -subj "/CN=push-enrichment throwaway CA" \
  -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem

issue() { # name subject extensions
  openssl ecparam -name prime256v1 -genkey -noout -out "$1-ec.pem"
  openssl pkcs8 -topk8 -nocrypt -in "$1-ec.pem" -out "$1-key.pem" && rm "$1-ec.pem"
  openssl req -new -key "$1-key.pem" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 30 -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm "$1.csr" "$1.ext"
}
issue server "/CN=localhost" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
issue client "/CN=Apple Push Services: com.example.app" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

openssl ecparam -name prime256v1 -genkey -noout -out p8-ec.pem
openssl pkcs8 -topk8 -nocrypt -in p8-ec.pem -out AuthKey_TEST123456.p8 && rm p8-ec.pem
openssl ec -in AuthKey_TEST123456.p8 -pubout -out AuthKey_TEST123456.pub.pem 2>/dev/null
rm -f ca.srl
echo "Wrote throwaway credentials to $(pwd): ca.pem server.pem server-key.pem client.pem client-key.pem AuthKey_TEST123456.p8 AuthKey_TEST123456.pub.pem"
