#!/usr/bin/env bash
# The fresh-machine check: clones this repository's HEAD into a temporary folder and runs the
# README's two commands there with every cache empty (the Go build and module caches, the
# test OS's package cache, bin/), as a new user on a new machine would, printing how long
# each step took. `make fresh-check` runs it; run it before resolving anything that touches
# set-up (Makefile, hack/, .ci/, go.mod).
#
#   make test   timed as its steps: make deps, make test-setup (tools, test OS, eraser, ESP,
#               agents, images, generated code, vet) and make test-only (the tests)
#   setup       the same without make test-only: the set-up's minutes alone
#   make demo   timed until every sample Machine is Running and each VM printed its ready
#               line; then the Machines are deleted and anvil dev is stopped with Ctrl-C
#
# What it cannot empty: Debian packages already installed stay installed (make deps then
# installs nothing; on a new machine it takes a few minutes more), and the Go toolchain.
#
# Environment: FRESH_TIMEOUT (minutes for the whole test part, default 90: CI's limit),
# FRESH_DEMO_TIMEOUT (minutes until the demo is up, default 20), FRESH_KEEP=1 keeps the
# folder even on success, FRESH_STEPS (default "test demo"; "setup" for make test's set-up alone).
set -euo pipefail

top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
steps=${FRESH_STEPS:-test demo}
test_limit=$((${FRESH_TIMEOUT:-90} * 60))
demo_limit=$((${FRESH_DEMO_TIMEOUT:-20} * 60))

if [ -n "$(git -C "$top" status --porcelain --untracked-files=no)" ]; then
	echo "fresh-check: uncommitted changes are not checked: it clones HEAD ($(git -C "$top" rev-parse --short HEAD))" >&2
fi

# A short path: anvil dev keeps its VMs' sockets under the clone (.anvil/pools/...), and a
# unix socket's path holds at most 107 bytes (README, "Two commands").
dir=$(mktemp -d /tmp/af.XXXXXX)
# A root runtime's QEMU runs as anvil-qemu, which must reach bin/anvil (its guest-forward
# command); mktemp makes the folder 0700.
chmod 0755 "$dir"
clone=$dir/anvil
export GOCACHE=$dir/cache/go-build GOMODCACHE=$dir/cache/go-mod XDG_CACHE_HOME=$dir/cache/xdg
export GOFLAGS=-modcacherw # so that the module cache can be removed afterwards
unset TESTOS_CACHE KUBEBUILDER_ASSETS
mkdir -p "$dir/logs" "$GOCACHE" "$GOMODCACHE" "$XDG_CACHE_HOME"

demo_pid=""
cleanup() {
	local rc=$?
	[ -n "$demo_pid" ] && stop_demo
	if [ "$rc" -eq 0 ] && [ -z "${FRESH_KEEP:-}" ]; then
		rm -rf "$dir"
	else
		echo "fresh-check: logs and caches kept in $dir"
	fi
}
trap cleanup EXIT

started=$(date +%s)
report=()
steps_total=0 # seconds spent in step so far
# step NAME SECONDS-LIMIT COMMAND...: runs COMMAND in the clone, logging to logs/NAME.log.
step() {
	local name=$1 limit=$2 t0 rc=0
	shift 2
	t0=$(date +%s)
	echo "fresh-check: $name ..."
	(cd "$clone" && timeout --kill-after=30 "$limit" "$@") >"$dir/logs/$name.log" 2>&1 || rc=$?
	local took=$(($(date +%s) - t0))
	steps_total=$((steps_total + took))
	report+=("$(printf '%-16s %5d s  %s' "$name" "$took" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")")
	if [ $rc -ne 0 ]; then
		echo "fresh-check: $name failed (exit $rc$([ $rc -eq 124 ] && echo ": time limit")); the end of logs/$name.log:" >&2
		tail -n 40 "$dir/logs/$name.log" >&2
		print_report
		exit 1
	fi
}

print_report() {
	echo "fresh-check: $(git -C "$clone" rev-parse --short HEAD) (the commit cloned), $(nproc) cores, $(date -u +%FT%TZ)"
	printf '  %s\n' "${report[@]}"
}

# built_since T0 prints when each thing in the clone's bin/ was written, in seconds after T0,
# first first: where a step's minutes went (a go build's output appears when it has linked).
built_since() {
	find "$clone/bin" -maxdepth 3 -type f -newermt "@$1" -printf '%T@ %P\n' 2>/dev/null | sort -n |
		awk -v t0="$1" '$2 !~ /\/(amd64|arm64)\/[^\/]*$/ || $2 ~ /agent$/ { printf "    +%5d s  %s\n", $1 - t0, $2 }'
}

# remaining prints the seconds left of the test part's limit.
remaining() {
	local left=$((test_limit - ($(date +%s) - started)))
	[ $left -gt 0 ] || { echo "fresh-check: out of time" >&2; exit 1; }
	echo $left
}

git clone --quiet --no-local "$top" "$clone"

if [[ " $steps " == *" test "* || " $steps " == *" setup "* ]]; then
	step "make deps" "$(remaining)" make deps
	step "make test-setup" "$(remaining)" make test-setup
	echo "fresh-check: what make test's set-up built, and when:"
	built_since "$started"
	if [[ " $steps " == *" test "* ]]; then
		step "make test-only" "$(remaining)" make test-only
		report+=("$(printf '%-16s %5d s  (%.1f min from a fresh clone)' "make test, all" "$steps_total" "$(awk -v s="$steps_total" 'BEGIN { print s / 60 }')")")
	fi
fi

# The demo: up, every sample Machine Running, each VM's console showing its ready line.
kubectl() { "$clone/bin/kubectl" --kubeconfig "$clone/.anvil/kubeconfig" "$@"; }

stop_demo() {
	# Machines first: VMs and emulated servers outlive anvil dev by design, so they are ended
	# through the API (a released server is wiped, then powered off by Ironic).
	kubectl delete machines --all --all-namespaces --wait --timeout=5m >>"$dir/logs/make demo.log" 2>&1 || true
	kill -INT -- "-$demo_pid" 2>/dev/null || true
	for _ in $(seq 60); do kill -0 -- "-$demo_pid" 2>/dev/null || break; sleep 1; done
	kill -KILL -- "-$demo_pid" 2>/dev/null || true
	# A VM or server that survived its Machine's deletion is still this check's: end it by its PID.
	local pid
	for pid in $(pgrep -f "qemu-system-.*$clone/" || true); do
		echo "fresh-check: a VM was left running after its Machine was deleted (pid $pid)" >&2
		kill "$pid" 2>/dev/null || true
	done
	demo_pid=""
}

if [[ " $steps " == *" demo "* ]]; then
	echo "fresh-check: make demo ..."
	t0=$(date +%s)
	(cd "$clone" && exec setsid make demo) >"$dir/logs/make demo.log" 2>&1 &
	demo_pid=$!
	up="" ready=""
	while [ $(($(date +%s) - t0)) -lt "$demo_limit" ]; do
		kill -0 "$demo_pid" 2>/dev/null || { echo "fresh-check: make demo exited early:" >&2; tail -n 40 "$dir/logs/make demo.log" >&2; exit 1; }
		if [ -z "$up" ] && grep -q "^anvil dev is up" "$dir/logs/make demo.log"; then
			up=$(($(date +%s) - t0))
		fi
		if [ -n "$up" ]; then
			states=$(kubectl get machines -A -o jsonpath='{range .items[*]}{.metadata.name}={.status.state}{"\n"}{end}' 2>/dev/null || true)
			vms=$(kubectl get machines -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}/{.spec.machinePoolRef.name}{"\n"}{end}' 2>/dev/null || true)
			if [ -n "$states" ] && ! grep -qv '=Running$' <<<"$states"; then
				ready=1
				while IFS=/ read -r ns name pool; do
					# Each VM's console log, through the console API (docs/console.md).
					[[ $pool == dev-qemu-* ]] || continue
					log=$(kubectl get --raw "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/$ns/machines/$name/consolelog" 2>/dev/null || true)
					[[ $log == *ANVIL-TESTOS-READY* ]] || ready=""
				done <<<"$vms"
				# The sample OSImage's builds end with its index published.
				images=$(kubectl get osimages -A -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null || true)
				[ -n "$images" ] && grep -qv '=True$' <<<"$images" && ready=""
				[ -n "$ready" ] && break
			fi
		fi
		sleep 2
	done
	took=$(($(date +%s) - t0))
	if [ -z "$ready" ]; then
		echo "fresh-check: the demo was not ready within ${demo_limit}s; Machines:" >&2
		echo "${states:-none}" >&2
		tail -n 40 "$dir/logs/make demo.log" >&2
		report+=("$(printf '%-16s %5d s  FAILED' "make demo" "$took")")
		print_report
		exit 1
	fi
	# The fleet UI the banner names answers its address (its token is in the path).
	ui_url=$(sed -n 's/^ *fleet UI *\(http:[^ ]*\)$/\1/p' "$dir/logs/make demo.log" | head -n 1)
	if [ -z "$ui_url" ] || ! curl -sf "$ui_url" | grep -q "<title>anvil</title>"; then
		echo "fresh-check: the banner's fleet UI (${ui_url:-none printed}) does not serve its page" >&2
		report+=("$(printf '%-16s %5d s  FAILED: fleet UI' "make demo" "$took")")
		print_report
		exit 1
	fi
	report+=("$(printf '%-16s %5d s  ok: up after %d s; %s; %s; fleet UI served' "make demo" "$took" "$up" "$(tr '\n' ' ' <<<"$states")" "$(tr '\n' ' ' <<<"$images")")")
	echo "fresh-check: what make demo built, and when:"
	built_since "$t0"
	stop_demo
fi

print_report
