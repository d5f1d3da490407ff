#!/usr/bin/env bash
# Makes throwaway TLS certificates for tests and trying out SSL listeners:
#   tools/mkcerts.sh DIR
# DIR gets (all PEM):
#   ca.pem                 the test CA (truststore for broker and clients)
#   server.pem             server key + certificate chain, SAN 127.0.0.1,
#                          localhost (ssl.keystore.location)
#   server-enc.pem         the same with the key encrypted, password "secret"
#   server.p12             the same as PKCS12, password "secret"
#   alice.pem, alice.key   client CN=alice,OU=eng,O=acme (and bob)
#   alice.crt              (certificate alone, for clients that want it so)
#   expired.pem/.key/.crt  a client certificate that expired
#   rogue.pem/.key/.crt    a client certificate from another CA
#   rogue-ca.pem           that other CA
#   mismatch.pem           bob's key with the server's certificate
# Keys are EC P-256 (fast); everything is valid for 30 days.  Not for
# production: the CA key sits next to the certificates.
set -euo pipefail
dir=${1:?usage: tools/mkcerts.sh DIR}
mkdir -p "$dir"
cd "$dir"
ossl() { openssl "$@" 2>/dev/null; }
key() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# A CA: key and self-signed certificate.
mkca() {
    key "$1.key"
    ossl req -x509 -new -key "$1.key" -subj "$2" -days 30 -out "$1.pem" \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign
}
# sign NAME SUBJECT CA EXT [days_ago_start days]
sign() {
    local name=$1 subj=$2 ca=$3 ext=$4
    key "$name.key"
    ossl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
    printf '%s\n' "$ext" > "$name.ext"
    if [ -n "${5:-}" ]; then
        # Expired: valid from 3 days ago to yesterday (x509 -not_before /
        # -not_after arrived in OpenSSL 3.4; `ca` has -startdate/-enddate).
        mkdir -p ca-db && : > ca-db/index && echo 01 > ca-db/serial
        cat > ca-db/cnf <<CNF
[ca]
default_ca = d
[d]
database = ca-db/index
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = p
copy_extensions = none
[p]
commonName = supplied
organizationalUnitName = optional
organizationName = optional
CNF
        ossl ca -batch -config ca-db/cnf -cert "$ca.pem" -keyfile "$ca.key" \
            -in "$name.csr" -out "$name.crt" -extfile "$name.ext" \
            -startdate "$5" -enddate "$6" -notext
    else
        ossl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" \
            -CAcreateserial -days 30 -sha256 -extfile "$name.ext" \
            -out "$name.crt"
    fi
    cat "$name.key" "$name.crt" > "$name.pem"
    rm -f "$name.csr" "$name.ext"
}

mkca ca "/O=Cairn test/CN=Cairn test CA"
mkca rogue-ca "/O=Elsewhere/CN=Another CA"
sign server "/O=acme/CN=localhost" ca \
    "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
cat ca.pem >> server.pem
client_ext="extendedKeyUsage=clientAuth"
sign alice "/O=acme/OU=eng/CN=alice" ca "$client_ext"
sign bob "/O=acme/OU=eng/CN=bob" ca "$client_ext"
sign rogue "/O=acme/OU=eng/CN=alice" rogue-ca "$client_ext"
sign expired "/O=acme/OU=eng/CN=alice" ca "$client_ext" \
    "$(date -u -d '-3 days' +%Y%m%d%H%M%SZ)" \
    "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)"
ossl pkey -in server.key -aes256 -passout pass:secret -out server-enc.key
cat server-enc.key server.crt ca.pem > server-enc.pem
ossl pkcs12 -export -inkey server.key -in server.crt -certfile ca.pem \
    -passout pass:secret -out server.p12
cat bob.key server.crt > mismatch.pem
rm -rf ca-db ca.srl rogue-ca.srl
echo "certificates in $dir"
