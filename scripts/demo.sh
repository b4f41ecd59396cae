#!/usr/bin/env bash
# make demo: two goroce processes, on 127.0.0.1 and 127.0.0.2, run every RC
# operation between them with data verification while each records its
# packets into a pcapng capture (pcap.Tap); rocedump then decodes the
# client's capture, and a one-second RDMA WRITE run shows the bandwidth
# next to a raw-UDP baseline. Needs only the binaries `make build` made.
#
# usage: scripts/demo.sh [OUTDIR]   (default out; DEMO_TIMEOUT=seconds, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
limit=${DEMO_TIMEOUT:-60}
perf=bin/roce-perf
dump=bin/rocedump
mkdir -p "$out"
for b in "$perf" "$dump"; do
	[[ -x $b ]] || { echo "demo: $b is missing: run 'make build' first" >&2; exit 1; }
done

# Every process we start is killed on the way out, however we leave.
pids=()
deadline=0
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# await PID NAME SLOG CLOG: wait for PID until the deadline and return its
# exit status; past the deadline, stop both processes and fail.
await() {
	local pid=$1
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			echo "demo: $2 did not finish within ${limit}s; stopping both processes" >&2
			tail -n 5 "$3" "$4" >&2
			exit 1
		fi
		sleep 0.1
	done
	wait "$pid"
}

# run_pair NAME "SERVER ARGS" "CLIENT ARGS": start a server on 127.0.0.1
# (control port: any free one, RoCE: UDP 4791) and a client on 127.0.0.2,
# wait for both (at most $limit seconds) and fail with their logs if either
# fails. Logs go to $out/NAME-{server,client}.log.
run_pair() {
	local name=$1 sargs=$2 cargs=$3
	local ready=$out/$name.addr slog=$out/$name-server.log clog=$out/$name-client.log
	rm -f "$ready"
	# shellcheck disable=SC2086 # the argument lists are meant to split
	"$perf" -d 127.0.0.1 -p 0 -ready "$ready" $sargs >"$slog" 2>&1 &
	local spid=$!
	pids+=("$spid")
	deadline=$((SECONDS + limit))
	until [[ -s $ready ]]; do
		if ! kill -0 "$spid" 2>/dev/null; then
			echo "demo: the server on 127.0.0.1 failed to start:" >&2
			sed 's/^/  /' "$slog" >&2
			echo "  (the demo needs UDP port 4791 free on 127.0.0.1 and 127.0.0.2; its control connection takes any free TCP port)" >&2
			exit 1
		fi
		((SECONDS < deadline)) || { echo "demo: the server did not start within ${limit}s" >&2; exit 1; }
		sleep 0.1
	done
	local port
	port=$(sed -n 's/.*:\([0-9][0-9]*\)$/\1/p' "$ready")
	# shellcheck disable=SC2086
	"$perf" -d 127.0.0.2 -p "$port" $cargs 127.0.0.1 >"$clog" 2>&1 &
	local cpid=$!
	pids+=("$cpid")
	# The client finishes first; if it fails, the server has nobody to
	# wait for.
	local src=0 crc=0
	await "$cpid" "$name" "$slog" "$clog" || crc=$?
	((crc == 0)) || kill "$spid" 2>/dev/null || true
	await "$spid" "$name" "$slog" "$clog" || src=$?
	if ((src != 0 || crc != 0)); then
		echo "demo: $name failed (server exit $src, client exit $crc):" >&2
		grep -h 'roce-perf:' "$slog" "$clog" | sed 's/^/  /' >&2 || true
		echo "  full logs: $slog $clog" >&2
		exit 1
	fi
}

echo "== goroce RC operations between two processes: 127.0.0.2 (requester) -> 127.0.0.1 (responder)"
run_pair demo "-capture $out/demo-server.pcapng" "-demo -capture $out/demo-client.pcapng"
grep -E '^ (SEND|RDMA|ATOMIC)' "$out/demo-client.log"
grep -h -E 'responder:|^demo:' "$out/demo-server.log" | sed 's/^ */   /'

echo
echo "== captures (pcap.Tap on each device): $out/demo-client.pcapng, $out/demo-server.pcapng"
for side in client server; do
	f=$out/demo-$side.pcapng
	total=$("$dump" -r "$f" | wc -l)
	ok=$("$dump" -r "$f" | grep -c 'icrc ok' || true)
	echo "   $side: $total RoCE packets, $ok with a verified ICRC"
done
echo
echo "== $dump -r $out/demo-client.pcapng -stats -q"
"$dump" -r "$out/demo-client.pcapng" -stats -q
echo
echo "== opcodes in the client capture"
"$dump" -r "$out/demo-client.pcapng" | awk '{print $6}' | sort | uniq -c | sort -k2 |
	awk '{ printf "   %3d %-32s", $1, $2; if (NR % 2 == 0) print "" } END { if (NR % 2) print "" }'
"$dump" -r "$out/demo-client.pcapng" -json >"$out/demo.json"

echo
echo "== RDMA WRITE bandwidth, 1 second, 64 KiB messages, with the raw-UDP baseline"
run_pair perf "" "-t write -D 1"
awk '/^ #bytes/ { hdr = $0; getline; rows[++n] = $0 }
     END { print hdr; print rows[1] "  <- goroce"; print rows[2] "  <- raw UDP" }' "$out/perf-client.log"
tail -n 1 "$out/perf-client.log"
echo
echo "== done: logs and captures in $out/ (open the .pcapng files with rocedump or Wireshark)"
