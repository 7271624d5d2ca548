#!/usr/bin/env bash
# Runs every test package in two lanes side by side, each one package at a time:
#   heavy: the packages that boot QEMU guests (TCG keeps a core busy), and test/cluster's
#          real node (one per machine: it holds a machine-wide lock);
#   light: the rest (unit tests, envtest control planes, the Cluster API manager, and the
#          packages that run Ironic with fake hardware only).
# Two heavy packages side by side starved each other on two cores (a QEMU conformance
# delete took over 2 minutes beside the Ironic tests when those booted servers too), so they
# never share the machine with each other; a light package beside one does not. A package
# is heavy for what its tests boot, not for what they run: Ironic with fake hardware
# (test/metal, whose emulated servers are test/metalservers; internal/provisioner/ironic,
# internal/ironic, internal/runtime/metal), test/security, test/cli (anvil dev without
# guests, out of test/e2e) and test/images (image builds, no guest) are light. The heavy lane
# is make test's length (the light lane ended half an hour before it), so a test that boots
# no guest belongs in a light package even when it shares a heavy package's subject. The
# heavy lane streams to stdout, the light lane to a log printed when both are done. Exit
# status: non-zero when either failed.
# Usage: hack/test.sh [go test flags...]
set -uo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
heavy=(
	./test/capiguest ./test/metalservers ./test/e2e ./test/broker ./test/chaos ./test/testos
	./test/cluster ./test/install ./test/debian ./test/kubeadm ./test/ui
	./internal/runtime/qemu ./internal/runtime/qemu/vm ./internal/runtime/qemu/qmp
	./internal/bmcemu ./test/nodeagent/nodeimage
)
# The tests make test leaves out, and why: test/debian's OS image builds on the Debian
# image (both architectures under TCG, apt through a package proxy, built twice) and their
# rollouts to Debian VMs and a server take about 35 minutes alone, which would take CI's
# make test (78 minutes) past its 90. It runs with make test-debian-builds (docs/debian.md,
# "The build and rollout test").
# And test/kubeadm's two tests, kubeadm in node-image guests under TCG: kubeadm init in one
# guest (about 10 minutes in make test) and a cluster of an amd64 control plane and an arm64
# worker on a segment (four TCG vCPUs, over 20 minutes). With them, make test took CI past its
# 90 minutes (session 24's submission); make test-kubeadm runs them (docs/kubeadm.md). So
# does it run the Cluster API cluster of two architectures (clusterctl's template, anvil's
# control-plane LoadBalancer, kubeadm from Cluster API's cloud-config: over 20 minutes).
skip='^(TestDebianOSImagesBuildAndRollOut|TestKubeadmInitInANodeImageGuest|TestKubeadmClusterOfTwoArchitecturesOnASegment|TestClusterAPIClusterOfTwoArchitectures)$'
exclude=()
for p in "${heavy[@]}"; do exclude+=(-e "$module/${p#./}"); done
mapfile -t light < <(go list ./... | grep -v -x -F "${exclude[@]}")

# go test -json through hack/testsummary: the output of plain go test (result lines, failed
# tests' output), and every package's and test's time in a file for the tables at the end.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/anvil-tests.XXXXXX")
go build -o "$tmp/testsummary" ./hack/testsummary || exit 1
# One anvil binary for every package that runs anvil as processes (harness.AnvilBinary), in
# a folder QEMU's unprivileged user can read (it runs anvil forward).
mkdir -m 0755 "$tmp/anvil" && go build -o "$tmp/anvil/anvil" ./cmd/anvil || exit 1
chmod 0755 "$tmp"
export ANVIL_TEST_BINARY=$tmp/anvil/anvil
log=$tmp/light.log
(go test -p 1 -json "$@" "${light[@]}" 2>&1 | "$tmp/testsummary" -times "$tmp/light.times") >"$log" 2>&1 &
light_pid=$!
trap 'kill "$light_pid" 2>/dev/null; exit 130' INT TERM
go test -p 1 -json -skip "$skip" "$@" "${heavy[@]}" 2>&1 | "$tmp/testsummary" -times "$tmp/heavy.times"
heavy_rc=$?
wait "$light_pid"
light_rc=$?
echo "=== the light lane (${#light[@]} packages) ==="
cat "$log"
# Where the minutes went: every package's own time, slowest first, each lane's sum; then the
# slowest tests of all.
echo "=== package durations (seconds, slowest first) ==="
for lane in heavy light; do
	awk -F'\t' -v lane="$lane" '$1 == "package" { print $2, lane, $3 }' "$tmp/$lane.times"
done | sort -rn | awk '{ printf "%9.1f  %-5s %s\n", $1, $2, $3; sum[$2] += $1 } END { for (l in sum) printf "%9.1f  %s lane in all\n", sum[l], l }'
echo "=== the 30 slowest tests (seconds) ==="
cat "$tmp"/*.times | awk -F'\t' '$1 == "test" { printf "%9.1f  %s\n", $2, $3 }' | sort -rn | head -30
rm -rf "$tmp"
if [ "$heavy_rc" -ne 0 ] || [ "$light_rc" -ne 0 ]; then
	echo "FAIL: heavy lane exit $heavy_rc, light lane exit $light_rc"
	exit 1
fi
