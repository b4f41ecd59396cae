#!/usr/bin/env bash
# Compare rocedump -json with tshark -T json on the given captures.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tshark >/dev/null || { echo "tshark-check: tshark is not installed (apt-get install tshark)" >&2; exit 1; }
exec python3 scripts/tshark-check.py bin/rocedump "$@"
