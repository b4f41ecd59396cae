#!/usr/bin/env bash
# make demo: two goroce processes, on 127.0.0.1 and 127.0.0.2, run every RC
# operation between them with data verification while each records its
# packets into a pcapng capture (pcap.Tap); rocedump then decodes the
# client's capture, and a one-second RDMA WRITE run shows the bandwidth
# next to a raw-UDP baseline. Then SMC-R between two smcat processes on the
# same addresses: a few MB echoed and checksummed, the connection as smcss
# lists it while it is open, and the SMC messages of the client's capture
# decoded by rocedump. Last, rping between two rping processes: the
# connection made by goroce's RDMA CM over QP 1 (REQ, REP, RTU, then DREQ
# and DREP), each message decoded by rocedump. Needs only the binaries
# `make build` made, and no privileges (SMC-R runs in its unprivileged
# mode).
#
# usage: scripts/demo.sh [OUTDIR]   (default out; DEMO_TIMEOUT=seconds, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
limit=${DEMO_TIMEOUT:-60}
perf=bin/roce-perf
dump=bin/rocedump
smcat=bin/smcat
smcss=bin/smcss
rping=bin/rping
mkdir -p "$out"
for b in "$perf" "$dump" "$smcat" "$smcss" "$rping"; do
	[[ -x $b ]] || { echo "demo: $b is missing: run 'make build' first" >&2; exit 1; }
done

# Every process we start is killed on the way out, however we leave.
pids=()
deadline=0
release=
cleanup() {
	local p
	[[ -z $release ]] || touch "$release" # ends a held stdin (SMC-R part)
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
echo "== the same two processes over the shared-memory link (-backend shm): RDMA WRITE and 64 B SEND latency"
echo "   (no socket between them: tcpdump on lo sees none of it; -backend udp is the default, -backend auto picks shm for goroce peers)"
run_pair shm-write "-backend shm" "-backend shm -t write -D 1"
tail -n 1 "$out/shm-write-client.log" | sed 's/^/   /'
run_pair shm-lat "-backend shm" "-backend shm -lat -D 1"
tail -n 1 "$out/shm-lat-client.log" | sed 's/^/   /'

# The SMC-R part: its own run directory, so that smcss lists this demo's
# processes only.
smc_run=$out/run
smc_flags=(-peer-speaks-smc -ueid GOROCE-DEMO -v)
echo
echo "== SMC-R between two processes: smcat echo, 127.0.0.2 (client) -> 127.0.0.1 (server)"
echo "   (unprivileged mode: no SMC TCP option, both sides told with -peer-speaks-smc; as root smcat sends the option by default)"
data=$out/smc-data.bin echoed=$out/smc-echo.bin
slog=$out/smc-server.log clog=$out/smc-client.log
release=$out/smc-release
rm -f "$release" "$echoed" "$out/smc-client.pcapng"
rm -rf "$smc_run"
head -c $((4 << 20)) /dev/urandom >"$data"
size=$(wc -c <"$data")
deadline=$((SECONDS + limit))
: >"$slog"
GOROCE_RUN_DIR=$smc_run "$smcat" "${smc_flags[@]}" --linger 5s -l --echo 127.0.0.1 0 2>"$slog" &
spid=$!
pids+=("$spid")
until grep -q 'listening on' "$slog"; do
	if ! kill -0 "$spid" 2>/dev/null; then
		echo "demo: the smcat server on 127.0.0.1 failed to start:" >&2
		sed 's/^/  /' "$slog" >&2
		exit 1
	fi
	((SECONDS < deadline)) || { echo "demo: the smcat server did not start within ${limit}s" >&2; exit 1; }
	sleep 0.1
done
port=$(sed -n 's/.*listening on [0-9.]*:\([0-9][0-9]*\).*/\1/p' "$slog")
# The client's stdin: the data, then held open until smcss has looked (at
# most $limit seconds), so that the connection is still up.
{
	cat "$data"
	for ((i = 0; i < limit * 10; i++)); do
		[[ -e $release ]] && break
		sleep 0.1
	done
} | GOROCE_RUN_DIR=$smc_run "$smcat" "${smc_flags[@]}" --linger 1s -capture "$out/smc-client.pcapng" \
	-s 127.0.0.2 127.0.0.1 "$port" >"$echoed" 2>"$clog" &
cpid=$!
pids+=("$cpid")
until [[ -s $echoed && $(wc -c <"$echoed") -ge $size ]]; do
	if ! kill -0 "$cpid" 2>/dev/null; then
		echo "demo: the smcat client failed:" >&2
		sed 's/^/  /' "$clog" "$slog" >&2
		exit 1
	fi
	((SECONDS < deadline)) || { echo "demo: the echo did not come back within ${limit}s" >&2; tail -n 5 "$clog" "$slog" >&2; exit 1; }
	sleep 0.1
done
sed -n 's/^smcat: /   /p' "$clog" | head -n 4
echo
echo "== $smcss -e and $smcss -R while the connection is open (each process publishes its SMC sockets)"
"$smcss" --run-dir "$smc_run" -e | sed 's/^/   /'
"$smcss" --run-dir "$smc_run" -R | sed 's/^/   /'
touch "$release" # stdin's EOF: the client shuts down writing, the server follows
src=0 crc=0
await "$cpid" smcat "$slog" "$clog" || crc=$?
await "$spid" smcat "$slog" "$clog" || src=$?
if ((src != 0 || crc != 0)); then
	echo "demo: smcat failed (server exit $src, client exit $crc):" >&2
	sed 's/^/  /' "$slog" "$clog" >&2
	exit 1
fi
sum() { if command -v sha256sum >/dev/null; then sha256sum <"$1"; else cksum <"$1"; fi | awk '{print $1}'; }
sent=$(sum "$data") got=$(sum "$echoed")
echo
if [[ $sent != "$got" ]]; then
	echo "demo: the echo differs from the data: $sent sent, $got back" >&2
	exit 1
fi
echo "== echo: $size bytes sent and back, checksums equal ($sent)"
grep -h -E 'ended|link groups' "$clog" | sed 's/^smcat: /   client: /'
grep -h -E 'ended|link groups' "$slog" | sed 's/^smcat: /   server: /'

echo
echo "== SMC-R over the shared-memory link: smcat -backend shm, 1 MiB echoed"
head -c $((1 << 20)) /dev/urandom >"$out/smc-shm-data.bin"
shm_flags=(-backend shm "${smc_flags[@]}")
: >"$out/smc-shm-server.log"
GOROCE_RUN_DIR=$smc_run "$smcat" "${shm_flags[@]}" --linger 1s -l --echo 127.0.0.1 0 2>"$out/smc-shm-server.log" &
spid=$!
pids+=("$spid")
deadline=$((SECONDS + limit))
until grep -q 'listening on' "$out/smc-shm-server.log"; do
	kill -0 "$spid" 2>/dev/null || { echo "demo: the smcat server (shm) failed to start:" >&2; sed 's/^/  /' "$out/smc-shm-server.log" >&2; exit 1; }
	((SECONDS < deadline)) || { echo "demo: the smcat server (shm) did not start within ${limit}s" >&2; exit 1; }
	sleep 0.1
done
port=$(sed -n 's/.*listening on [0-9.]*:\([0-9][0-9]*\).*/\1/p' "$out/smc-shm-server.log")
GOROCE_RUN_DIR=$smc_run "$smcat" "${shm_flags[@]}" --linger 1s -s 127.0.0.2 127.0.0.1 "$port" \
	<"$out/smc-shm-data.bin" >"$out/smc-shm-echo.bin" 2>"$out/smc-shm-client.log" &
cpid=$!
pids+=("$cpid")
src=0 crc=0
await "$cpid" "smcat (shm)" "$out/smc-shm-server.log" "$out/smc-shm-client.log" || crc=$?
await "$spid" "smcat (shm)" "$out/smc-shm-server.log" "$out/smc-shm-client.log" || src=$?
if ((src != 0 || crc != 0)) || [[ $(sum "$out/smc-shm-data.bin") != $(sum "$out/smc-shm-echo.bin") ]]; then
	echo "demo: smcat over shm failed (server exit $src, client exit $crc, or the echo differs):" >&2
	sed 's/^/  /' "$out/smc-shm-server.log" "$out/smc-shm-client.log" >&2
	exit 1
fi
grep -h -E 'SMC-R|link 1:' "$out/smc-shm-client.log" | sed 's/^smcat: /   /'
echo "   1 MiB sent and back, checksums equal"

cap=$out/smc-client.pcapng
echo
echo "== SMC messages in the client's capture ($cap; CLC is TCP, so not in a RoCE capture)"
"$dump" -r "$cap" >"$out/smc-client.txt"
total=$(wc -l <"$out/smc-client.txt")
ok=$(grep -c 'icrc ok' "$out/smc-client.txt" || true)
echo "   $total RoCE packets, $ok with a verified ICRC"
echo "   every LLC message:"
grep ' smc LLC ' "$out/smc-client.txt" | sed 's/^\([^ ]*\) \([^ ]*\) > \([^:]*\):.* smc /     \1 \2 > \3 /'
echo "   the first and last CDC messages:"
grep ' smc CDC ' "$out/smc-client.txt" | sed -n '1,3p;$p' | sed 's/^\([^ ]*\) \([^ ]*\) > \([^:]*\):.* smc /     \1 \2 > \3 /'
echo "   counts:"
awk '/ smc CDC /  { cdc++ }
     / smc LLC /  { llc++ }
     /RDMA_WRITE/ { w++; if (match($0, /payload [0-9]+/)) wb += substr($0, RSTART + 8, RLENGTH - 8) }
     END { printf "     %d CDC, %d LLC, %d RDMA WRITE packets carrying %d bytes (both directions)\n", cdc, llc, w, wb }' "$out/smc-client.txt"

# The RDMA CM part: librdmacm's rping on both sides, the server on
# 127.0.0.1, the client on 127.0.0.2, each with a capture.
echo
echo "== rping through the RDMA CM: 127.0.0.2 (client) -> 127.0.0.1 (server), 10 pings of 64 bytes, verified"
slog=$out/rping-server.log clog=$out/rping-client.log
deadline=$((SECONDS + limit))
"$rping" -s -d -V -a 127.0.0.1 -p 7999 -C 10 -S 64 --capture "$out/rping-server.pcapng" >"$slog" 2>&1 &
spid=$!
pids+=("$spid")
until grep -q rdma_listen "$slog"; do
	if ! kill -0 "$spid" 2>/dev/null; then
		echo "demo: the rping server on 127.0.0.1 failed to start:" >&2
		sed 's/^/  /' "$slog" >&2
		exit 1
	fi
	((SECONDS < deadline)) || { echo "demo: the rping server did not start within ${limit}s" >&2; exit 1; }
	sleep 0.1
done
"$rping" -c -v -V -a 127.0.0.1 -I 127.0.0.2 -p 7999 -C 10 -S 64 --stats --capture "$out/rping-client.pcapng" >"$clog" 2>&1 &
cpid=$!
pids+=("$cpid")
src=0 crc=0
await "$cpid" rping "$slog" "$clog" || crc=$?
((crc == 0)) || kill "$spid" 2>/dev/null || true
await "$spid" rping "$slog" "$clog" || src=$?
if ((src != 0 || crc != 0)); then
	echo "demo: rping failed (server exit $src, client exit $crc):" >&2
	sed 's/^/  /' "$slog" "$clog" >&2
	exit 1
fi
grep '^ping data' "$clog" | sed -n '1,2p;$p' | sed 's/^/   /'
echo "   the client's CM counters (--stats): $(grep '^cm ' "$clog" | awk '{ printf "%s%s=%s", sep, $2, $3; sep = " " }')"
# The server's capture: the client exits after its DREQ, as librdmacm's
# does, so the DREP is in the server's only.
cap=$out/rping-server.pcapng
echo
echo "== the CM's messages in the server's capture ($cap): MADs to and from QP 1"
"$dump" -r "$cap" >"$out/rping-server.txt"
grep ' CM ' "$out/rping-server.txt" | sed 's/^\([^ ]*\) \([^ ]*\) > \([^:]*\):.* CM /   \1 \2 > \3 /' | fold -s -w 150 | sed '2,$s/^\([^ ]\)/       \1/'
# Into a file first: grep -m 1 stops reading at its match, and under
# pipefail rocedump's SIGPIPE would fail the demo.
"$dump" -r "$cap" -json >"$out/rping-server.json"
grep -m 1 '"CM REQ"' "$out/rping-server.json" >"$out/rping-req.json"
echo "   (the REQ, every field of the MAD, the CM message and its rdma_cm header, as rocedump -json decodes it: $out/rping-req.json)"
total=$(wc -l <"$out/rping-server.txt")
echo "   $total RoCE packets: $(grep -c ' CM ' "$out/rping-server.txt") MADs, the rest the pings' SENDs, READs, WRITEs and ACKs"

echo
echo "== done: logs and captures in $out/ (open the .pcapng files with rocedump or Wireshark)"
