#!/usr/bin/env bash
# make_softhsm_token.sh DIR PIN [CERT KEY]: a SoftHSM2 token "espvpn-test" in DIR (its config
# DIR/softhsm2.conf, to be given to the client as SOFTHSM2_CONF) holding CERT and its KEY (default:
# certs/client.pem and certs/client-key.pem; an RSA or EC key in PEM) as object "client".
# GnuTLS (espvpn) and openconnect reach it through p11-kit's softhsm2.module. Exit 77: no SoftHSM2.
set -euo pipefail
dir=$1 pin=$2
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cert=${3:-$repo/certs/client.pem} key=${4:-$repo/certs/client-key.pem}
command -v softhsm2-util >/dev/null && command -v p11tool >/dev/null || { echo "SKIP: softhsm2 or p11tool missing"; exit 77; }
mkdir -p "$dir/tokens"
printf 'directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n' "$dir" >"$dir/softhsm2.conf"
export SOFTHSM2_CONF=$dir/softhsm2.conf
softhsm2-util --init-token --free --label espvpn-test --so-pin 0000 --pin "$pin" >/dev/null
# certtool writes text before the PEM; SoftHSM2 imports unencrypted PKCS#8.
sed -n '/-----BEGIN/,/-----END/p' "$key" | openssl pkcs8 -topk8 -nocrypt -out "$dir/key.p8"
softhsm2-util --import "$dir/key.p8" --token espvpn-test --label client --id 01 --pin "$pin" >/dev/null
rm -f "$dir/key.p8"
GNUTLS_PIN=$pin p11tool --login --write --load-certificate "$cert" --label client --id 01 \
  "pkcs11:token=espvpn-test" >/dev/null 2>&1
# espvpn run by root opens the token in its session process, as nobody in these tests (no -U,
# no sudo invoker): the token is that user's, as a user's own token is theirs.
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1; then
  chown -R nobody "$dir"
  chmod o+x "$(dirname "$dir")"
fi
