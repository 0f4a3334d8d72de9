#!/bin/sh
# Installs the Debian 12 packages sandgate needs to build and test.
# Runs apt-get only when something is missing; then it updates the lists first.
set -eu

PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev
libssl-dev libevent-dev libc-ares-dev libyaml-dev libsqlite3-dev sqlite3
libmaxminddb-dev libjansson-dev libmnl-dev libnftables-dev
curl git bind9-dnsutils dnsmasq-base openssl iproute2 nftables procps
python3 python3-requests python3-cryptography nginx-light libmaxmind-db-writer-perl crun runsc"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing" >&2
$SUDO apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
