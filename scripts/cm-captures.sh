#!/usr/bin/env bash
# cm-captures.sh OUTDIR: goroce's own RDMA CM captures. rping (RC, the
# REQ/REP/RTU and DREQ/DREP exchange), ucmatose (several connections at
# once) and udaddy (SIDR_REQ/SIDR_REP and UD SENDs with immediate data)
# run as a server on 127.0.0.1 and a client on 127.0.0.2, each process
# recording its device's packets (--capture) into
# OUTDIR/{rping,ucmatose,udaddy}-{server,client}.pcapng. Needs the binaries
# `make build` made, UDP port 4791 free on both addresses, and no privileges.
# CM_CAPTURES_TIMEOUT: seconds for each pair (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/cm-captures.sh OUTDIR}
limit=${CM_CAPTURES_TIMEOUT:-30}
mkdir -p "$out"
for b in rping ucmatose udaddy; do
	[[ -x bin/$b ]] || { echo "cm-captures: bin/$b is missing: run 'make build' first" >&2; exit 1; }
done

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pair NAME READY "SERVER ARGS" "CLIENT ARGS": start bin/NAME as the server,
# wait for READY in its output, run the client, and fail with both logs
# unless both exit 0 within the time limit.
pair() {
	local name=$1 ready=$2 sargs=$3 cargs=$4
	local slog=$out/$name-server.log clog=$out/$name-client.log
	local deadline=$((SECONDS + limit))
	# shellcheck disable=SC2086 # the argument lists are meant to split
	timeout "$limit" "bin/$name" $sargs --capture "$out/$name-server.pcapng" >"$slog" 2>&1 &
	local spid=$!
	pids+=("$spid")
	until grep -q "$ready" "$slog"; do
		if ! kill -0 "$spid" 2>/dev/null || ((SECONDS >= deadline)); then
			echo "cm-captures: the $name server did not start:" >&2
			sed 's/^/  /' "$slog" >&2
			exit 1
		fi
		sleep 0.05
	done
	local src=0 crc=0
	# shellcheck disable=SC2086
	timeout "$limit" "bin/$name" $cargs --capture "$out/$name-client.pcapng" >"$clog" 2>&1 || crc=$?
	((crc == 0)) || kill "$spid" 2>/dev/null || true
	wait "$spid" || src=$?
	if ((src != 0 || crc != 0)); then
		echo "cm-captures: $name failed (server exit $src, client exit $crc):" >&2
		sed 's/^/  server: /' "$slog" >&2
		sed 's/^/  client: /' "$clog" >&2
		exit 1
	fi
}

pair rping rdma_listen "-s -d -V -a 127.0.0.1 -p 7999 -C 10 -S 100" "-c -V -a 127.0.0.1 -I 127.0.0.2 -p 7999 -C 10 -S 100"
pair ucmatose "starting server" "-b 127.0.0.1 -p 7471 -c 3 -C 5" "-s 127.0.0.1 -b 127.0.0.2 -p 7471 -c 3 -C 5"
pair udaddy "starting server" "-b 127.0.0.1 -c 2 -C 5" "-s 127.0.0.1 -b 127.0.0.2 -c 2 -C 5"
