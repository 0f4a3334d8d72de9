#!/bin/bash
# TLS interception benchmark (issue 4, SPEC §6): requests per second over an
# intercepted keep-alive connection and new TLS sessions per second, measured
# in one run against a direct connection to an nginx origin, sandgate, Squid
# with ssl-bump and mitmproxy. Loopback only; every process it starts is
# stopped by PID. Run by hand (not by CTest):
#
#   bench/bench_tls.sh [BUILD_DIR]        (default: ./build)
#
# Environment: BENCH_SECONDS (5) per measurement, BENCH_ROUNDS (3; the table
# shows medians), BENCH_THREADS (4) client threads, SANDGATE_WORKERS (1),
# BENCH_KEEP=1 keeps the work directory.
# Installs squid-openssl and mitmproxy with apt-get when they are missing.
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
DUR=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
THREADS=${BENCH_THREADS:-4}
SG_WORKERS=${SANDGATE_WORKERS:-1}
ORIGIN_IP=127.0.0.2
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/sg-bench-tls.XXXXXX)
PIDS=()

log() { printf '%s\n' "bench_tls: $*" >&2; }

# Stop one process we started: SIGTERM, then SIGKILL after 5 s.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		stop_pid "$pid"
	done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_bg() {	# start_bg LOGFILE CMD...: background process, PID in $LAST_PID
	local out=$1
	shift
	"$@" >"$out" 2>&1 &
	LAST_PID=$!
	PIDS+=("$LAST_PID")
}

wait_port() {	# wait_port HOST PORT PID: up to 20 s for a listener
	local i
	for i in $(seq 200); do
		kill -0 "$3" 2>/dev/null || return 1
		if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

free_port() {
	"$PY" -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])' "$1"
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# ------------------------------------------------------------------ packages

missing=()
installed squid-openssl || missing+=(squid-openssl)
installed mitmproxy || missing+=(mitmproxy)
installed nginx-light || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	# No package may start a system service (a stray squid on :3128).
	made_policy=0
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" >"$WORK/apt.log" 2>&1 ||
	    { apt-get update >>"$WORK/apt.log" 2>&1 &&
	      apt-get install -y --no-install-recommends "${missing[@]}" >>"$WORK/apt.log" 2>&1; } ||
	    { [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
	      tail -20 "$WORK/apt.log" >&2; log "apt-get failed"; exit 1; }
	[ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

# ------------------------------------------------------------------ binaries

SANDGATE=$BUILD/sandgate
CLIENT=$BUILD/bench/bench_client
if [ ! -x "$SANDGATE" ] || [ ! -x "$CLIENT" ]; then
	log "building sandgate and bench_client in $BUILD"
	cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$BUILD" -j "$(nproc)" --target sandgate bench_client >/dev/null
fi

# ------------------------------------------------------------------ certificates

chmod 755 "$WORK"
cd "$WORK"
mkcert_ca() {	# mkcert_ca NAME: NAME.crt, NAME.key (ECDSA P-256)
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -days 7 -subj "/CN=bench $1" \
	    -addext basicConstraints=critical,CA:TRUE \
	    -addext keyUsage=critical,keyCertSign,cRLSign \
	    -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
mkcert_ca origin-ca
# The targets are IP literals (no resolver needed anywhere). Squid 5 checks
# an IP target against the certificate's CN and DNS names only, never its IP
# SANs: hence the CN; the others check the IP SAN.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=$ORIGIN_IP" -keyout origin.key -out origin.csr 2>/dev/null
printf 'subjectAltName=DNS:bench.test,IP:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    "$ORIGIN_IP" >origin.ext
openssl x509 -req -in origin.csr -CA origin-ca.crt -CAkey origin-ca.key \
    -days 7 -extfile origin.ext -out origin.crt 2>/dev/null

# ------------------------------------------------------------------ origin

ORIGIN_PORT=$(free_port $ORIGIN_IP)
TARGET=$ORIGIN_IP:$ORIGIN_PORT
BODY=$(head -c 96 /dev/zero | tr '\0' 'x')
mkdir -p nginx/logs
user_line=""
[ "$(id -u)" = 0 ] && user_line="user root;"
cat >nginx/nginx.conf <<EOF
$user_line
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  default_type text/plain;
  server {
    listen $TARGET ssl;
    ssl_certificate $WORK/origin.crt;
    ssl_certificate_key $WORK/origin.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    location / { return 200 "$BODY\n"; }
  }
}
EOF
start_bg nginx/stderr.log /usr/sbin/nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;'
NGINX_PID=$LAST_PID
wait_port $ORIGIN_IP "$ORIGIN_PORT" "$NGINX_PID" || { cat nginx/stderr.log nginx/logs/error.log >&2; exit 1; }

# ------------------------------------------------------------------ proxies
# All of them run for the whole measurement (idle ones cost nothing), so the
# rounds below can interleave the targets: drift in a shared machine's speed
# then spreads over all of them instead of favouring one.

declare -A CA PROXY PID
TARGETS=(direct)
CA[direct]=origin-ca.crt
PROXY[direct]=""
PID[direct]=""

# (b) sandgate
mkdir -p sg/policies sg/var
SG_PORT=$(free_port 127.0.0.1)
cat >sg/sandgate.yaml <<EOF
state_dir: $WORK/sg/var
listen:
  http: 127.0.0.1:$SG_PORT
  socks5: null
  dns: null
  transparent: null
  ingress: null
  metrics: null
  admin: null
policies: [$WORK/sg/policies]
ca: { cert: $WORK/sg/ca.crt, key: $WORK/sg/ca.key }
vault: { db: $WORK/sg/var/vault.db, key_file: $WORK/sg/vault.key }
upstream:
  resolvers: ["127.0.0.1:53"]   # never used: the target is an IP literal
  ca_bundle: $WORK/origin-ca.crt
audit: { db: $WORK/sg/var/audit.db }
# one sandbox is the whole load here: its fair share is not what is measured
limits: { per_sandbox: { max_connections: 0, connections_per_second: 0 } }
workers: $SG_WORKERS
EOF
cat >sg/policies/bench.yaml <<EOF
sandboxes:
  - id: bench
    policy: bench
    source: [127.0.0.1/32]
policies:
  - name: bench
    allow:
      - cidr: $ORIGIN_IP/32
        ports: [$ORIGIN_PORT]
        tls: intercept
        methods: [GET]
        paths: ["/bench*"]
    allow_private: [$ORIGIN_IP/32]
EOF
start_bg sg/sandgate.log "$SANDGATE" serve -c "$WORK/sg/sandgate.yaml"
if wait_port 127.0.0.1 "$SG_PORT" "$LAST_PID"; then
	TARGETS+=(sandgate)
	CA[sandgate]=sg/ca.crt
	PROXY[sandgate]=127.0.0.1:$SG_PORT
	PID[sandgate]=$LAST_PID
else
	log "sandgate did not start:"
	tail -20 sg/sandgate.log >&2
fi

# (c) Squid with ssl-bump: peek at the ClientHello, stare at the origin's
# certificate, bump (the usual server-first setup; leaves mimic the origin's)
SQ_PORT=$(free_port 127.0.0.1)
mkdir -p squid
( cd squid && mkcert_ca squid-ca )
cat >squid/squid.conf <<EOF
http_port 127.0.0.1:$SQ_PORT ssl-bump tls-cert=$WORK/squid/squid-ca.crt tls-key=$WORK/squid/squid-ca.key generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program /usr/lib/squid/security_file_certgen -s $WORK/squid/ssl_db -M 16MB
sslcrtd_children 5 startup=1 idle=1
acl step1 at_step SslBump1
acl step2 at_step SslBump2
acl step3 at_step SslBump3
ssl_bump peek step1
ssl_bump stare step2
ssl_bump bump step3
tls_outgoing_options cafile=$WORK/origin-ca.crt min-version=1.2
http_access allow localhost
http_access deny all
cache deny all
access_log stdio:$WORK/squid/access.log
cache_log $WORK/squid/cache.log
pid_filename $WORK/squid/squid.pid
coredump_dir $WORK/squid
visible_hostname sandgate-bench
shutdown_lifetime 1 seconds
dns_nameservers 127.0.0.1
pinger_enable off
EOF
SQUID_USER=proxy
id "$SQUID_USER" >/dev/null 2>&1 || SQUID_USER=nobody
echo "cache_effective_user $SQUID_USER" >>squid/squid.conf
/usr/lib/squid/security_file_certgen -c -s "$WORK/squid/ssl_db" -M 16MB >/dev/null
chown -R "$SQUID_USER" squid
start_bg squid/stderr.log /usr/sbin/squid -N -f "$WORK/squid/squid.conf"
if wait_port 127.0.0.1 "$SQ_PORT" "$LAST_PID"; then
	TARGETS+=(squid)
	CA[squid]=squid/squid-ca.crt
	PROXY[squid]=127.0.0.1:$SQ_PORT
	PID[squid]=$LAST_PID
else
	log "squid did not start:"
	tail -20 squid/stderr.log squid/cache.log >&2 || true
fi

# (d) mitmproxy, with an ECDSA CA of its own like the others
MP_PORT=$(free_port 127.0.0.1)
mkdir -p mitm
( cd mitm && mkcert_ca mitm-ca && cat mitm-ca.key mitm-ca.crt >mitmproxy-ca.pem &&
  cp mitm-ca.crt mitmproxy-ca-cert.pem )
start_bg mitm/mitmdump.log mitmdump --listen-host 127.0.0.1 --listen-port "$MP_PORT" \
    --set confdir="$WORK/mitm" --set ssl_verify_upstream_trusted_ca="$WORK/origin-ca.crt" \
    --set flow_detail=0 --set termlog_verbosity=warn
if wait_port 127.0.0.1 "$MP_PORT" "$LAST_PID"; then
	TARGETS+=(mitmproxy)
	CA[mitmproxy]=mitm/mitm-ca.crt
	PROXY[mitmproxy]=127.0.0.1:$MP_PORT
	PID[mitmproxy]=$LAST_PID
else
	log "mitmproxy did not start:"
	tail -20 mitm/mitmdump.log >&2 || true
fi

# ------------------------------------------------------------------ measuring

declare -A RATES CPU	# "NAME MODE" -> the rate / CPU us per op of every round
HZ=$(getconf CLK_TCK)
cpu_ticks() {	# user + system ticks of a process (all its threads), or 0
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || { echo 0; return; }
	sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}
client() {	# client NAME MODE [ARGS]: one run; its output line
	local name=$1 mode=$2 args=()
	shift 2
	[ -n "${PROXY[$name]}" ] && args+=(-x "${PROXY[$name]}")
	"$CLIENT" "${args[@]+"${args[@]}"}" -t "$TARGET" -C "${CA[$name]}" \
	    -p /bench -m "$mode" "$@" 2>"$WORK/client.err" || true
	if [ -s "$WORK/client.err" ]; then
		sed "s/^/    $name: /" "$WORK/client.err" >&2
	fi
}

for name in "${TARGETS[@]}"; do
	# Warm-up: leaf certificates minted, caches filled; not counted.
	client "$name" sessions -c 1 -d 5 -n 3 >/dev/null
done
for round in $(seq "$ROUNDS"); do
	for name in "${TARGETS[@]}"; do
		for mode in keepalive sessions; do
			t0=$(cpu_ticks "${PID[$name]}")
			out=$(client "$name" "$mode" -c "$THREADS" -d "$DUR")
			t1=$(cpu_ticks "${PID[$name]}")
			log "round $round $name: $out"
			case $out in
			*" errors=0 "*rate=*)
				RATES["$name $mode"]+=" ${out##*rate=}"
				ok=${out##*ok=}
				ok=${ok%% *}
				[ -n "${PID[$name]}" ] && CPU["$name $mode"]+=" $(( (t1 - t0) * 1000000 / HZ / (ok > 0 ? ok : 1) ))"
				;;
			*) RATES["$name $mode"]+=" n/a" ;;
			esac
		done
	done
done

median() {	# median RATE...: the median, or n/a when any run failed
	"$PY" -c 'import statistics, sys
v = sys.argv[1:]
print("n/a" if not v or "n/a" in v else "%.0f" % statistics.median(map(float, v)))' "$@"
}
declare -A RPS SPS RCPU SCPU
for name in direct sandgate squid mitmproxy; do
	# shellcheck disable=SC2086
	RPS[$name]=$(median ${RATES["$name keepalive"]:-})
	# shellcheck disable=SC2086
	SPS[$name]=$(median ${RATES["$name sessions"]:-})
	# shellcheck disable=SC2086
	RCPU[$name]=$(median ${CPU["$name keepalive"]:-})
	# shellcheck disable=SC2086
	SCPU[$name]=$(median ${CPU["$name sessions"]:-})
done
RCPU[direct]=- SCPU[direct]=-
if [ -n "${PROXY[sandgate]:-}" ]; then
	SG_ROWS=$("$PY" -c 'import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(c.execute("select count(*) from events").fetchone()[0])' "$WORK/sg/var/audit.db" 2>/dev/null || echo "?")
	log "sandgate wrote $SG_ROWS audit rows"
fi

# ------------------------------------------------------------------ report

ratio() {
	"$PY" -c 'import sys
a, b = sys.argv[1], sys.argv[2]
try:
    print("%.2f" % (float(a) / float(b)))
except (ValueError, ZeroDivisionError):
    print("n/a")' "$1" "$2"
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo
echo "TLS interception benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -sr)"
echo "versions: sandgate $("$SANDGATE" version 2>/dev/null | head -1 | awk '{print $NF}')," \
    "$(/usr/sbin/squid -v | head -1 | sed 's/.*Version /squid /')," \
    "mitmproxy $(dpkg-query -W -f='${Version}' mitmproxy)," \
    "nginx $(/usr/sbin/nginx -v 2>&1 | sed 's/.*nginx\///')," \
    "$(openssl version | awk '{print $1, $2}')"
echo "load: $THREADS client threads, median of $ROUNDS rounds of ${DUR}s," \
    "${#BODY}+1-byte body, ECDSA P-256 everywhere; sandgate workers: $SG_WORKERS"
echo
printf '%-22s %12s %12s %16s %16s\n' "" "requests/s" "sessions/s" \
    "proxy CPU us/req" "us/session"
for n in direct sandgate squid mitmproxy; do
	printf '%-22s %12s %12s %16s %16s\n' "$n" "${RPS[$n]}" "${SPS[$n]}" \
	    "${RCPU[$n]}" "${SCPU[$n]}"
done
printf '%-22s %12s %12s\n' "sandgate/squid" \
    "$(ratio "${RPS[sandgate]}" "${RPS[squid]}")" "$(ratio "${SPS[sandgate]}" "${SPS[squid]}")"
printf '%-22s %12s %12s\n' "sandgate/mitmproxy" \
    "$(ratio "${RPS[sandgate]}" "${RPS[mitmproxy]}")" "$(ratio "${SPS[sandgate]}" "${SPS[mitmproxy]}")"
echo "(targets, issue 4: sandgate/squid >= 2, sandgate/mitmproxy >= 10 in requests/s)"
