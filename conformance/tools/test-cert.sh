#!/bin/sh
# Make a test CA and a server certificate signed by it, for `flagsync serve --tls-cert`
# and `sse-load --tls-ca` (BENCHMARKS.md, "Fan-out"):
#
#   conformance/tools/test-cert.sh DIR
#
# writes DIR/ca.pem (the CA certificate: --tls-ca), DIR/cert.pem (the server
# certificate, SAN IP:127.0.0.1, IP:::1 and DNS:localhost: --tls-cert) and DIR/key.pem
# (its key: --tls-key). ECDSA P-256, valid 30 days. For tests only: the CA's key is
# deleted once the certificate is signed.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
dir=$1
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$tmp/ca-key.pem" -out "$dir/ca.pem" -days 30 \
    -subj "/CN=flagsync test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/key.pem" -out "$tmp/cert.csr" -subj "/CN=localhost" 2>/dev/null
cat > "$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
EXT
openssl x509 -req -in "$tmp/cert.csr" -CA "$dir/ca.pem" -CAkey "$tmp/ca-key.pem" \
    -CAcreateserial -CAserial "$tmp/ca.srl" -out "$dir/cert.pem" -days 30 -sha256 -extfile "$tmp/ext.cnf" 2>/dev/null
chmod 600 "$dir/key.pem"
echo "$dir/ca.pem (--tls-ca), $dir/cert.pem (--tls-cert), $dir/key.pem (--tls-key)"
