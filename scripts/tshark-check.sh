#!/usr/bin/env bash
# Compare rocedump -json with tshark -T json on the given captures, and on
# goroce's own RDMA CM captures (scripts/cm-captures.sh into
# out/tshark-check) when the CM tools are built.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tshark >/dev/null || { echo "tshark-check: tshark is not installed (apt-get install tshark)" >&2; exit 1; }
own=()
if [[ -x bin/rping && -x bin/ucmatose && -x bin/udaddy ]]; then
	dir=out/tshark-check
	rm -rf "$dir"
	scripts/cm-captures.sh "$dir"
	own=("$dir"/*.pcapng)
fi
exec python3 scripts/tshark-check.py bin/rocedump "$@" "${own[@]}"
