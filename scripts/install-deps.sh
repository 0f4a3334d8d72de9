#!/bin/sh
# Installs the Debian 12 packages sandgate needs, and creates the system user
# `sandgate` that `sandgate serve` drops to (config `user:`). Runs apt-get
# only when something is missing; then it updates the lists first.
#
#   install-deps.sh run    what building and running need (make run)
#   install-deps.sh        that and what the tests need (make test)
set -eu

MODE=${1:-test}
case "$MODE" in
run | test) ;;
*) echo "usage: $0 [run|test]" >&2; exit 2 ;;
esac

# Building: the compiler and the libraries the binary links. Running: the
# launcher execs runsc or crun and drives ip and nft; curl is the
# quick start's client.
RUN_PKGS="build-essential cmake pkg-config
libssl-dev libevent-dev libc-ares-dev libyaml-dev libsqlite3-dev
libmaxminddb-dev libjansson-dev libmnl-dev libnftables-dev libseccomp-dev libsystemd-dev
libnghttp2-dev libpq-dev libncurses-dev libhyperscan-dev zlib1g-dev libidn2-dev
crun runsc iproute2 nftables curl"

# The tests' clients, servers and tools; the sanitizer and fuzz builds (clang);
# the package build.
TEST_PKGS="clang libclang-rt-14-dev sqlite3
git bind9-dnsutils dnsmasq-base openssl procps
python3 python3-requests python3-cryptography python3-grpcio python3-hpack python3-jsonschema nginx-light
nghttp2-client libmaxmind-db-writer-perl
debhelper lintian mandoc bash-completion fakeroot strace
publicsuffix rsyslog tmux
postgresql-15 postgresql-client-15 python3-yaml python3-boto3 kubernetes-client
prometheus"

PKGS=$RUN_PKGS
[ "$MODE" = run ] || PKGS="$RUN_PKGS $TEST_PKGS"

# kubectl renders deploy/kubernetes in a test; Debian's kubernetes-client
# would clash with a kubectl another package already installed, which serves.
if command -v kubectl >/dev/null 2>&1 &&
    ! dpkg-query -W -f='${Status}' kubernetes-client 2>/dev/null | grep -q 'install ok installed'; then
	PKGS=$(echo "$PKGS" | tr ' ' '\n' | grep -v '^kubernetes-client$' | tr '\n' ' ')
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -n "$missing" ]; then
	echo "installing:$missing" >&2
	$SUDO apt-get update -q
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# Debian's prometheus starts a service on 127.0.0.1:9090 where systemd runs:
# the tests start their own, and 9090 is the gateway's default metrics port.
case "$missing" in
*" prometheus"*)
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		echo "stopping and disabling the prometheus service the package started" >&2
		$SUDO systemctl disable --now prometheus.service || true
	fi ;;
esac

# The unprivileged account of the network process: no home, no shell.
if ! getent passwd sandgate >/dev/null; then
	echo "creating the system user sandgate" >&2
	$SUDO useradd --system --no-create-home --shell /usr/sbin/nologin sandgate
fi
