#!/usr/bin/env bash
# Runs every test package in two lanes side by side, each one package at a time:
#   heavy: the packages that boot QEMU guests (TCG keeps a core busy) or run Ironic, and
#          test/cluster's real node (one per machine: it holds a machine-wide lock);
#   light: the rest (unit tests, envtest control planes, the Cluster API manager).
# Two heavy packages side by side starved each other on two cores (a QEMU conformance
# delete took over 2 minutes beside the Ironic tests), so they never share the machine with
# each other; a light package beside one does not. The heavy lane streams to stdout, the
# light lane to a log printed when both are done. Exit status: non-zero when either failed.
# Usage: hack/test.sh [go test flags...]
set -uo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
heavy=(
	./test/capiguest ./test/metal ./test/e2e ./test/broker ./test/chaos ./test/testos ./test/security
	./test/cluster ./test/install ./test/images
	./internal/runtime/qemu ./internal/runtime/qemu/vm ./internal/runtime/qemu/qmp
	./internal/provisioner/ironic ./internal/runtime/metal
	./internal/bmcemu ./internal/ironic ./internal/nodeagent/nodeimage
)
exclude=()
for p in "${heavy[@]}"; do exclude+=(-e "$module/${p#./}"); done
mapfile -t light < <(go list ./... | grep -v -x -F "${exclude[@]}")

log=$(mktemp "${TMPDIR:-/tmp}/anvil-light-tests.XXXXXX")
heavy_log=$(mktemp "${TMPDIR:-/tmp}/anvil-heavy-tests.XXXXXX")
go test -p 1 "$@" "${light[@]}" >"$log" 2>&1 &
light_pid=$!
trap 'kill "$light_pid" 2>/dev/null; exit 130' INT TERM
go test -p 1 "$@" "${heavy[@]}" 2>&1 | tee "$heavy_log"
heavy_rc=${PIPESTATUS[0]}
wait "$light_pid"
light_rc=$?
echo "=== the light lane (${#light[@]} packages) ==="
cat "$log"
# Where the minutes went: every package's own time, slowest first, each lane's sum.
echo "=== package durations (seconds, slowest first) ==="
for lane in heavy light; do
	f=$log
	[ "$lane" = heavy ] && f=$heavy_log
	awk -v lane="$lane" '($1 == "ok" || $1 == "FAIL") && $3 ~ /^[0-9.]+s$/ { sub(/s$/, "", $3); print $3, lane, $1, $2 }' "$f"
done | sort -rn | awk '{ printf "%9.1f  %-5s %-4s %s\n", $1, $2, $3, $4; sum[$2] += $1 } END { for (l in sum) printf "%9.1f  %s lane in all\n", sum[l], l }'
rm -f "$log" "$heavy_log"
if [ "$heavy_rc" -ne 0 ] || [ "$light_rc" -ne 0 ]; then
	echo "FAIL: heavy lane exit $heavy_rc, light lane exit $light_rc"
	exit 1
fi
