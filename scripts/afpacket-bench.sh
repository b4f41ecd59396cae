#!/usr/bin/env bash
# make bench-afpacket: roce-perf between two network namespaces joined by a
# veth pair, on the AF_PACKET backend and on the UDP backend in the same
# run, interleaved (A, B, C, A, B, C, ...) so that the machine's noise falls
# on all: the AF_PACKET backend receiving with recvmmsg (afpacket) and with
# its TPACKET_V3 ring (afpacket-ring, -rx ring), and the UDP backend. RDMA WRITE of 64 KiB (bandwidth) and the 64-byte SEND ping-pong
# (latency). Prints one line per run and the medians. Needs root (it
# creates the namespaces, and AF_PACKET needs CAP_NET_RAW); uses
# 198.18.0.0/15 addresses inside its own namespaces only, and deletes them
# on the way out.
#
# usage: scripts/afpacket-bench.sh [ROUNDS [SECONDS [BACKENDS]]]
#   default 3 rounds of 2 s per test, BACKENDS "afpacket afpacket-ring udp"
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-2}
backends=${3:-afpacket afpacket-ring udp}
perf=bin/roce-perf
[[ -x $perf ]] || { echo "afpacket-bench: $perf is missing: run 'make build' first" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "afpacket-bench: needs root (network namespaces, CAP_NET_RAW)" >&2; exit 1; }

id=$$
nsa=gbench-$id-a nsb=gbench-$id-b ifa=gb${id}a ifb=gb${id}b
a=198.18.200.1 b=198.18.200.2
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	ip netns del "$nsa" 2>/dev/null || true
	ip netns del "$nsb" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$nsa"
ip netns add "$nsb"
ip link add "$ifa" netns "$nsa" type veth peer name "$ifb" netns "$nsb"
ip -n "$nsa" addr add $a/24 dev "$ifa"
ip -n "$nsb" addr add $b/24 dev "$ifb"
ip -n "$nsa" link set "$ifa" up
ip -n "$nsb" link set "$ifb" up
ip -n "$nsa" link set lo up
ip -n "$nsb" link set lo up

# run BACKEND TESTARGS...: one server/client pair; prints the client's summary line.
run() {
	local backend=$1 rx=mmsg
	shift
	if [[ $backend == afpacket-ring ]]; then backend=afpacket rx=ring; fi
	local bargs=(-backend "$backend")
	[[ $backend == afpacket ]] && bargs+=(-rx "$rx")
	local ready
	ready=$(mktemp)
	rm -f "$ready"
	ip netns exec "$nsb" timeout 60 "$perf" "${bargs[@]}" -i "$ifb" -p 0 -ready "$ready" >/dev/null 2>&1 &
	pids+=($!)
	local server=$!
	for _ in $(seq 200); do [[ -s $ready ]] && break; sleep 0.05; done
	[[ -s $ready ]] || { echo "afpacket-bench: the server did not start" >&2; return 1; }
	local port=${ready:+$(sed 's/.*://' "$ready")}
	ip netns exec "$nsa" timeout 60 "$perf" "${bargs[@]}" -i "$ifa" -p "$port" -raw=false -D "$secs" "$@" $b | tail -n 1
	wait "$server" || true
	rm -f "$ready"
}

declare -A vals
for r in $(seq "$rounds"); do
	for backend in $backends; do
		w=$(run $backend -t write -s 65536)
		l=$(run $backend -lat -s 64)
		echo "round $r $backend: $w | $l"
		vals[$backend-w]+="$(sed -E 's/.*goroce ([0-9.]+) Gbit\/s.*/\1/' <<<"$w") "
		vals[$backend-l]+="$(sed -E 's/.*goroce ([0-9.]+) usec.*/\1/' <<<"$l") "
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for backend in $backends; do
	echo "median $backend: WRITE 64 KiB $(median <<<"${vals[$backend-w]}") Gbit/s, SEND 64 B latency $(median <<<"${vals[$backend-l]}") us"
done
