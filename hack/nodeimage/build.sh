#!/usr/bin/env bash
# Builds anvil's Kubernetes node image for amd64 and arm64 (docs/kubeadm.md): the Debian
# image's disk form (make debian) with containerd, runc, the CNI plugins and iptables
# (Debian's), and kubelet, kubeadm and kubectl built from the project's Kubernetes pin
# (make kube), set up as kubeadm expects a node to be. Into OUTDIR:
#   OUTDIR/disk/ARCH/kernel, initramfs, cmdline   the Debian image's own
#   OUTDIR/disk/ARCH/disk.qcow2                    its root with the node's packages, 4 GiB
#   OUTDIR/VERSIONS                                the packages added (ARCH PACKAGE VERSION
#                                                  SHA256-OF-DEB) and the Kubernetes binaries
#                                                  (ARCH kube/NAME - SHA256)
#   OUTDIR/KUBERNETES_VERSION                      kubeadm's version (v1.36.3)
#
# How: the added packages come from the lock file hack/nodeimage/packages, fetched with the
# test OS's archive logic (one cache with the Debian image). The Debian root is grown to 4 GiB
# on the host (resize2fs), and a guest of the root's own architecture (QEMU, TCG: no program
# of another architecture runs on this host) boots the test OS's kernel with a busybox
# initramfs (hack/nodeimage/rootfs/init) beside a second disk that carries the packages, the
# binaries and hack/nodeimage/finish: it installs the packages with the root's own dpkg, puts
# the binaries in /usr/bin, runs finish in the root and powers off. Both architectures' guests
# run at once; this takes minutes, not the Debian image's hour, since nothing of Debian's own
# set is installed again.
#
#   build.sh DEBIANDIR KUBEDIR OUTDIR   build from the lock (DEBIANDIR: make debian's output;
#                                       KUBEDIR: make kube's, KUBEDIR/ARCH/kubelet ...)
#   build.sh --relock                   resolve hack/nodeimage/include against the archive as
#                                       it is today, on top of hack/debian/packages, and
#                                       rewrite hack/nodeimage/packages
#
# A build's output is kept in the package cache under the hash of its inputs (this folder,
# the Debian image's VERSIONS and disk, the binaries), as the Debian image's is: the same
# inputs again copy it in seconds.
#
# Environment: TESTOS_CACHE (the package cache, shared with the test OS and the Debian image),
# NODEIMAGE_STAGE_TIMEOUT (seconds for each guest, default 3600), NODEIMAGE_ARCHS (the
# architectures to build, default "amd64 arm64": one alone is for trying a change quickly).
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
lock=$here/packages
debian_lock=$here/../debian/packages
read -r -a archs <<<"${NODEIMAGE_ARCHS:-amd64 arm64}"
binaries=(kubelet kubeadm kubectl)
cache=${TESTOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil/testos}

# shellcheck source=hack/testos/archive.sh
source "$here/../testos/archive.sh"

# installed_status ARCH writes a dpkg status file that says the Debian image's packages are
# installed, with their real control fields (dependencies, provides) read from the cached
# .debs the Debian image was built from, so that apt resolves only what the node adds.
installed_status() {
	local a=$1 pa pkg ver deb
	while read -r pa pkg ver; do
		[ "$pa" = "$a" ] || continue
		deb=$(fetch "$a" "$pkg" "$ver")
		dpkg-deb -f "$deb" | grep -v -E '^(Description|Homepage|Maintainer|Original-Maintainer|Installed-Size|Section|Priority)?:|^ ' |
			sed '/^Package:/a Status: install ok installed'
		echo
	done < <(grep -v '^#' "$debian_lock" | sed '/^$/d')
}

if [ "${1:-}" = --relock ] && [ $# -eq 1 ]; then
	begin_build nodeimage apt-get apt-cache dpkg-deb flock
	new=$lock.new
	sed -n '1,/^$/p' "$lock" >"$new" # the header comment
	mapfile -t top < <(sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$here/include")
	for a in "${archs[@]}"; do
		update_lists "$a"
		installed_status "$a" >"$work/status-$a"
		# shellcheck disable=SC2046
		apt-get $(apt_opts "$a" | sed "s|-oDir::State::status=[^ ]*|-oDir::State::status=$work/status-$a|") \
			-s install --no-install-recommends "${top[@]}" >"$work/plan-$a" || {
			cat "$work/plan-$a" >&2
			exit 1
		}
		sed -n "s/^Inst \([^ ]*\) (\([^ ]*\) .*/$a \1 \2/p" "$work/plan-$a"
	done | LC_ALL=C sort >>"$new"
	mv "$new" "$lock"
	echo "nodeimage: wrote $lock ($(grep -vc '^#' "$lock") lines)"
	exit 0
fi

if [ $# -ne 3 ]; then
	echo "usage: $0 DEBIANDIR KUBEDIR OUTDIR | --relock" >&2
	exit 2
fi
debian=$(realpath "$1") kube=$(realpath "$2") out=$(realpath -m "$3")
# kubeadm of this host's architecture names the image's version (KUBERNETES_VERSION).
host_kubeadm=$kube/$(dpkg --print-architecture)/kubeadm
[ -x "$host_kubeadm" ] || { echo "nodeimage: $host_kubeadm is missing: run make kube" >&2; exit 1; }
for a in "${archs[@]}"; do
	for f in kernel initramfs cmdline disk.qcow2; do
		[ -f "$debian/disk/$a/$f" ] || { echo "nodeimage: $debian/disk/$a/$f is missing: run make debian" >&2; exit 1; }
	done
	for b in "${binaries[@]}"; do
		[ -x "$kube/$a/$b" ] || { echo "nodeimage: $kube/$a/$b is missing: run make kube" >&2; exit 1; }
	done
done

# inputs_hash names this build's output: every file here, the Debian image it starts from,
# the binaries it adds, and the test OS's inputs (the guest's kernel and busybox).
inputs_hash() {
	{
		(cd "$here/.." && find nodeimage testos -type f | LC_ALL=C sort | xargs sha256sum)
		(cd "$debian" && sha256sum VERSIONS disk/*/*)
		for a in "${archs[@]}"; do (cd "$kube/$a" && echo "$a" && sha256sum "${binaries[@]}"); done
	} | sha256sum | cut -c1-16
}
kept=$cache/nodeimage-$(inputs_hash)
if [ -f "$kept/VERSIONS" ]; then
	rm -rf "$out.new"
	cp -al "$kept" "$out.new" 2>/dev/null || { rm -rf "$out.new"; cp -a "$kept" "$out.new"; }
	rm -rf "$out"
	mv "$out.new" "$out"
	# Newer than its inputs, so make takes it as up to date (the copy keeps the kept
	# files' times, older than a fresh clone's).
	touch "$out/VERSIONS"
	echo "nodeimage: $out from $kept (built earlier from the same inputs)"
	exit 0
fi

# The guest's initramfs: the test OS's kernel and busybox with this folder's /init and the
# modules the Debian image's second stage loads (the disks are virtio).
"$here/../testos/build.sh" "$out.stage" "$here/rootfs" "$here/../debian/stage2/modules" >&2

begin_build nodeimage apt-get dpkg-deb mke2fs resize2fs e2fsck qemu-img qemu-system-x86_64 qemu-system-aarch64 sha256sum flock
trap 'rm -rf "$work" "$out.new" "$out.stage"' EXIT
new=$out.new
rm -rf "$new"
mkdir -p "$new"
echo "# What the node image adds to the Debian image: ARCH PACKAGE VERSION SHA256 (.deb, or the binary for kube/NAME)" >"$new/VERSIONS"

qemu_for() {
	case $1 in
	amd64) echo qemu-system-x86_64 -machine q35 ;;
	arm64) echo qemu-system-aarch64 -machine virt -cpu cortex-a57 ;;
	esac
}

console_for() {
	case $1 in
	amd64) echo ttyS0 ;;
	arm64) echo ttyAMA0 ;;
	esac
}

# fsck_and ARCH COMMAND... checks ARCH's root filesystem (exit status 1, errors corrected,
# is no failure: a clean shutdown never needs it), then runs COMMAND; either failing ends the
# build with its output.
fsck_and() {
	local a=$1 log=$work/$1/fsck.log rc=0
	shift
	e2fsck -fy "$work/$a/disk.raw" >"$log" 2>&1 || rc=$?
	if [ "$rc" -gt 1 ] || ! "$@" >>"$log" 2>&1; then
		echo "nodeimage: $a: checking or growing the root failed:" >&2
		cat "$log" >&2
		exit 1
	fi
}

# payload ARCH makes $work/ARCH/payload.raw: an ext4 filesystem with debs/ (the locked
# packages), bin/ (the Kubernetes binaries) and finish.
payload() {
	local a=$1 p=$work/$1/payload pa pkg ver deb b
	mkdir -p "$p/debs" "$p/bin"
	while read -r pa pkg ver; do
		[ "$pa" = "$a" ] || continue
		deb=$(fetch "$a" "$pkg" "$ver")
		ln -f "$deb" "$p/debs/" 2>/dev/null || cp "$deb" "$p/debs/"
		echo "$a $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(sha256sum "$deb" | cut -d' ' -f1)" >>"$new/VERSIONS"
	done < <(grep -v '^#' "$lock" | sed '/^$/d')
	for b in "${binaries[@]}"; do
		install -m 0755 "$kube/$a/$b" "$p/bin/$b"
		echo "$a kube/$b - $(sha256sum "$p/bin/$b" | cut -d' ' -f1)" >>"$new/VERSIONS"
	done
	install -m 0755 "$here/finish" "$p/finish"
	truncate -s "$(($(du -sb "$p" | cut -f1) / 1048576 + 64))M" "$work/$a/payload.raw"
	mke2fs -q -t ext4 -d "$p" "$work/$a/payload.raw"
	rm -rf "$p"
}

# stage ARCH boots the guest that turns $work/ARCH/disk.raw into a node and fails unless
# its console ends with the success line.
stage() {
	local a=$1 log=$work/$1/stage.log rc=0
	# shellcheck disable=SC2046
	timeout --kill-after=10 "${NODEIMAGE_STAGE_TIMEOUT:-3600}" $(qemu_for "$a") -accel tcg -smp 1 -m 1024 \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$out.stage/$a/kernel" -initrd "$out.stage/$a/initramfs" \
		-append "console=$(console_for "$a") panic=-1" \
		-blockdev "{\"driver\":\"raw\",\"file\":{\"driver\":\"file\",\"filename\":\"$work/$a/disk.raw\"},\"node-name\":\"root\",\"cache\":{\"no-flush\":true}}" \
		-device virtio-blk-pci,drive=root \
		-blockdev "{\"driver\":\"raw\",\"file\":{\"driver\":\"file\",\"filename\":\"$work/$a/payload.raw\"},\"node-name\":\"payload\",\"read-only\":true}" \
		-device virtio-blk-pci,drive=payload -serial "file:$log" >"$work/$a/qemu.log" 2>&1 || rc=$?
	if ! grep -q '^ANVIL-NODEIMAGE-OK' "$log"; then
		echo "nodeimage: $a: the guest failed (QEMU exit $rc); the end of its console:" >&2
		tail -n 40 "$log" >&2
		cat "$work/$a/qemu.log" >&2
		return 1
	fi
}

for a in "${archs[@]}"; do
	mkdir -p "$work/$a"
	payload "$a"
	qemu-img convert -O raw "$debian/disk/$a/disk.qcow2" "$work/$a/disk.raw"
	# Room for the packages, the binaries and the first images a node pulls; a machine's
	# volume grows it further (cloud-init's resize_rootfs).
	truncate -s 4G "$work/$a/disk.raw"
	fsck_and "$a" resize2fs -f "$work/$a/disk.raw"
done

pids=()
for a in "${archs[@]}"; do
	stage "$a" &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || exit 1

for a in "${archs[@]}"; do
	disk=$work/$a/disk.raw
	fsck_and "$a" true
	d=$new/disk/$a
	mkdir -p "$d"
	cp "$debian/disk/$a/kernel" "$debian/disk/$a/initramfs" "$debian/disk/$a/cmdline" "$d/"
	qemu-img convert -c -O qcow2 "$disk" "$d/disk.qcow2"
done

# The version the image's tag carries (anvil dev: anvil/kubernetes-node:VERSION), asked of
# this host's own build of the same kubeadm.
"$host_kubeadm" version -o short >"$new/KUBERNETES_VERSION"

rm -rf "$out.old"
[ -e "$out" ] && mv "$out" "$out.old"
mv "$new" "$out"
rm -rf "$out.old"
rm -rf "$cache"/nodeimage-*
{ cp -al "$out" "$kept.new" 2>/dev/null || { rm -rf "$kept.new"; cp -a "$out" "$kept.new"; }; } && mv "$kept.new" "$kept"
echo "nodeimage: built $out ($(for a in "${archs[@]}"; do echo -n "$a: disk $(du -h "$out/disk/$a/disk.qcow2" | cut -f1); "; done))"
