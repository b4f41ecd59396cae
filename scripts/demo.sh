#!/usr/bin/env bash
# make demo: decode a real kernel rxe capture with rocedump.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
mkdir -p "$out"
cap=conformance/testdata/rxe/smcr_echo_small.pcap
echo "== rocedump -r $cap (first 12 lines)"
bin/rocedump -r "$cap" -c 12
echo "== rocedump -stats"
bin/rocedump -r "$cap" -stats -q
bin/rocedump -r "$cap" -json > "$out/demo.json"
echo "== $(wc -l < "$out/demo.json") JSON records in $out/demo.json"
