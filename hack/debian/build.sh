#!/usr/bin/env bash
# Builds anvil's Debian 12 image for amd64 and arm64 into OUTDIR (docs/debian.md), in two
# forms of one root:
#   OUTDIR/disk/ARCH/kernel      the Debian cloud kernel
#   OUTDIR/disk/ARCH/initramfs   the initramfs Debian's initramfs-tools made for it
#   OUTDIR/disk/ARCH/disk.qcow2  the root: one ext4 filesystem labelled anvil-root, no partitions
#   OUTDIR/disk/ARCH/cmdline     root=LABEL=anvil-root and the architecture's serial console
#   OUTDIR/ram/ARCH/kernel       the same kernel
#   OUTDIR/ram/ARCH/initramfs    the whole root as one zstd-compressed cpio archive, /init being
#                                systemd: what a server boots from RAM (Ironic's ramdisk deploy)
#   OUTDIR/ram/ARCH/cmdline      the serial console
#   OUTDIR/VERSIONS              every Debian package in it: ARCH PACKAGE VERSION SHA256-OF-DEB
# (`anvil image push REF --from amd64=OUTDIR/disk/amd64 --from arm64=OUTDIR/disk/arm64`
# publishes a form.)
#
# How: every package comes from the lock file hack/debian/packages (ARCH PACKAGE VERSION, the
# whole set), fetched with the test OS's archive logic (hack/testos/archive.sh: the same cache,
# pins replaced with a warning when the archive drops them). The fetched .debs become a local
# mirror; debootstrap's first stage unpacks them on the host (no program of the root runs);
# then a guest of the root's own architecture (QEMU, TCG) boots the test OS's kernel with a
# busybox initramfs (hack/debian/stage2) that runs debootstrap's second stage — the maintainer
# scripts, which this host cannot run for another architecture — and hack/debian/finish,
# writes the RAM form's archive to a second disk, and powers off. The kernel and initramfs
# are read out of the finished filesystem.
#
#   build.sh OUTDIR           build from the lock
#   build.sh --relock         resolve hack/debian/include against the archive as it is today
#                             and rewrite hack/debian/packages (downloads what is new)
#
# A build's output is kept in the package cache under the hash of everything it is made from
# (this folder, the test OS's pins and scripts): the same inputs again copy it from there in
# seconds instead of booting the guests (a fresh clone with a warm cache, as CI has). Only
# the latest output is kept.
#
# Environment: TESTOS_CACHE (the package cache, shared with the test OS), DEBIAN_MIRROR (for
# --relock, default http://deb.debian.org/debian), DEBIAN_STAGE2_TIMEOUT (seconds for each
# guest, default 7200: under TCG on two busy cores the arm64 guest took over an hour).
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
lock=$here/packages
archs=(amd64 arm64)
suite=bookworm
cache=${TESTOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil/testos}

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR | --relock" >&2
	exit 2
fi

# includes prints the top-level packages, comma-separated, for ARCH (@ARCH@ is the
# architecture's name in package names).
includes() {
	grep -v '^#' "$here/include" | sed 's/#.*//; s/[[:space:]]//g; /^$/d' | sed "s/@ARCH@/$1/g" | paste -sd, -
}

if [ "$1" = --relock ]; then
	command -v debootstrap >/dev/null || { echo "debian: debootstrap is missing: run make deps" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	new=$lock.new
	sed -n '1,/^$/p' "$lock" >"$new" # the header comment
	for a in "${archs[@]}"; do
		debootstrap --foreign --arch="$a" --variant=minbase --include="$(includes "$a")" \
			--cache-dir="$work/debs-$a" "$suite" "$work/root-$a" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2
		for deb in "$work/root-$a"/var/cache/apt/archives/*.deb; do
			echo "$a $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
		done | LC_ALL=C sort >>"$new"
	done
	mv "$new" "$lock"
	echo "debian: wrote $lock ($(grep -vc '^#' "$lock") packages)"
	exit 0
fi

out=$(realpath -m "$1")

# inputs_hash names the output of this build's inputs: every file under hack/debian and
# the test OS build's own inputs (its kernel pin is the second stage's kernel).
inputs_hash() {
	(cd "$here/.." && find debian testos -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16
}
kept=$cache/debian-$(inputs_hash)
if [ -f "$kept/VERSIONS" ]; then
	rm -rf "$out.new"
	cp -al "$kept" "$out.new" 2>/dev/null || { rm -rf "$out.new"; cp -a "$kept" "$out.new"; }
	rm -rf "$out"
	mv "$out.new" "$out"
	echo "debian: $out from $kept (built earlier from the same inputs)"
	exit 0
fi

# The second stage's initramfs is a sibling of the eraser: the test OS's build with its own
# rootfs and modules (and its own kernel, the test OS's pin). It takes the cache's lock
# itself, so it runs before this build takes it.
"$here/../testos/build.sh" "$out.stage2" "$here/stage2/rootfs" "$here/stage2/modules" >&2

# shellcheck source=hack/testos/archive.sh
source "$here/../testos/archive.sh"
begin_build debian apt-get apt-cache dpkg-deb dpkg-scanpackages debootstrap mke2fs debugfs e2fsck \
	qemu-img qemu-system-x86_64 qemu-system-aarch64 zstd sha256sum flock
trap 'rm -rf "$work" "$out.new" "$out.stage2"' EXIT
new=$out.new
rm -rf "$new"
mkdir -p "$new"
echo "# Debian packages this image was built from: ARCH PACKAGE VERSION SHA256-OF-DEB" >"$new/VERSIONS"

# mirror ARCH makes $work/ARCH/mirror, a Debian archive of exactly the locked packages.
mirror() {
	local a=$1 m=$work/$1/mirror pkg ver deb
	mkdir -p "$m/pool" "$m/dists/$suite/main/binary-$a"
	while read -r pa pkg ver; do
		[ "$pa" = "$a" ] || continue
		deb=$(fetch "$a" "$pkg" "$ver")
		ln -f "$deb" "$m/pool/" 2>/dev/null || cp "$deb" "$m/pool/"
		echo "$a $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(sha256sum "$deb" | cut -d' ' -f1)" >>"$new/VERSIONS"
	done < <(grep -v '^#' "$lock" | sed '/^$/d')
	(cd "$m" && dpkg-scanpackages --arch "$a" pool /dev/null 2>"$work/$a/scanpackages.log") >"$m/dists/$suite/main/binary-$a/Packages" || {
		echo "debian: $a: dpkg-scanpackages failed:" >&2
		cat "$work/$a/scanpackages.log" >&2
		exit 1
	}
	local p=main/binary-$a/Packages
	{
		echo "Suite: $suite"
		echo "Codename: $suite"
		echo "Architectures: $a"
		echo "Components: main"
		echo "SHA256:"
		echo " $(sha256sum "$m/dists/$suite/$p" | cut -d' ' -f1) $(stat -c %s "$m/dists/$suite/$p") $p"
	} >"$m/dists/$suite/Release"
}

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

# stage2 ARCH boots the guest that finishes ARCH's root on $work/ARCH/disk.raw and fails
# unless its console ends with the success line.
stage2() {
	local a=$1 log=$work/$1/stage2.log rc=0
	# shellcheck disable=SC2046
	timeout --kill-after=10 "${DEBIAN_STAGE2_TIMEOUT:-7200}" $(qemu_for "$a") -accel tcg -smp 1 -m 2048 \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$out.stage2/$a/kernel" -initrd "$out.stage2/$a/initramfs" \
		-append "console=$(console_for "$a") panic=-1" \
		-blockdev "{\"driver\":\"raw\",\"file\":{\"driver\":\"file\",\"filename\":\"$work/$a/disk.raw\"},\"node-name\":\"root\",\"cache\":{\"no-flush\":true}}" \
		-device virtio-blk-pci,drive=root \
		-blockdev "{\"driver\":\"raw\",\"file\":{\"driver\":\"file\",\"filename\":\"$work/$a/ram.raw\"},\"node-name\":\"ram\"}" \
		-device virtio-blk-pci,drive=ram -serial "file:$log" >"$work/$a/qemu.log" 2>&1 || rc=$?
	if ! grep -q '^ANVIL-DEBIAN-STAGE2-OK' "$log"; then
		echo "debian: $a: the second stage failed (QEMU exit $rc); the end of its console:" >&2
		tail -n 40 "$log" >&2
		cat "$work/$a/qemu.log" >&2
		return 1
	fi
}

for a in "${archs[@]}"; do
	mkdir -p "$work/$a"
	mirror "$a"
	debootstrap --foreign --arch="$a" --variant=minbase --no-check-gpg --include="$(includes "$a")" \
		"$suite" "$work/$a/root" "file://$work/$a/mirror" >"$work/$a/debootstrap.log" 2>&1 || {
		echo "debian: $a: debootstrap's first stage failed (is hack/debian/packages the whole set? build.sh --relock):" >&2
		tail -n 20 "$work/$a/debootstrap.log" >&2
		exit 1
	}
	install -m 0755 "$here/finish" "$work/$a/root/anvil-finish"
	install -m 0755 "$here/raminit" "$work/$a/root/anvil-raminit"
	# Room for the second stage's unpacking; a machine's volume grows it (cloud-init's
	# resize_rootfs). A fixed UUID and hash seed: the filesystem names nothing of the build.
	truncate -s 2G "$work/$a/disk.raw" "$work/$a/ram.raw"
	mke2fs -q -t ext4 -L anvil-root -U 6e0a7c4d-8b1f-4f7a-9d0e-616e76696c00 -E hash_seed=6e0a7c4d-8b1f-4f7a-9d0e-616e76696c01 \
		-d "$work/$a/root" "$work/$a/disk.raw"
	rm -rf "$work/$a/root" "$work/$a/mirror"
done

# Both guests at once, one core each.
pids=()
for a in "${archs[@]}"; do
	stage2 "$a" &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || exit 1

for a in "${archs[@]}"; do
	disk=$work/$a/disk.raw
	e2fsck -fy "$disk" >/dev/null 2>&1 || [ $? -le 1 ] # 1: corrected, which a clean shutdown never needs but is no failure
	boot=$(debugfs -R 'ls -p /boot' "$disk" 2>/dev/null | awk -F/ '$6 ~ /^vmlinuz-/ { print $6 }')
	[ "$(wc -l <<<"$boot")" -eq 1 ] && [ -n "$boot" ] || { echo "debian: $a: expected one kernel in /boot, found: $boot" >&2; exit 1; }
	release=${boot#vmlinuz-}
	d=$new/disk/$a r=$new/ram/$a
	mkdir -p "$d" "$r"
	debugfs -R "dump /boot/vmlinuz-$release $d/kernel" "$disk" >/dev/null 2>&1
	debugfs -R "dump /boot/initrd.img-$release $d/initramfs" "$disk" >/dev/null 2>&1
	[ -s "$d/kernel" ] && [ -s "$d/initramfs" ] || { echo "debian: $a: no kernel or initramfs for $release in /boot" >&2; exit 1; }
	chmod 0644 "$d/kernel" "$d/initramfs"
	qemu-img convert -c -O qcow2 "$disk" "$d/disk.qcow2"
	echo "console=$(console_for "$a") root=LABEL=anvil-root rw" >"$d/cmdline"

	bytes=$(sed -n 's/^ANVIL-DEBIAN-RAMROOT bytes=\([0-9]*\).*/\1/p' "$work/$a/stage2.log" | tail -n1)
	[ -n "$bytes" ] || { echo "debian: $a: the second stage did not say how long the RAM form is" >&2; exit 1; }
	cp "$d/kernel" "$r/kernel"
	head -c "$bytes" "$work/$a/ram.raw" | zstd -q -T1 -12 >"$r/initramfs"
	echo "console=$(console_for "$a")" >"$r/cmdline"
done

rm -rf "$out.old"
[ -e "$out" ] && mv "$out" "$out.old"
mv "$new" "$out"
rm -rf "$out.old"
# Kept for the next build of the same inputs; older outputs go.
rm -rf "$cache"/debian-*
{ cp -al "$out" "$kept.new" 2>/dev/null || { rm -rf "$kept.new"; cp -a "$out" "$kept.new"; }; } && mv "$kept.new" "$kept"
echo "debian: built $out ($(for a in "${archs[@]}"; do echo -n "$a: disk $(du -h "$out/disk/$a/disk.qcow2" | cut -f1), RAM $(du -h "$out/ram/$a/initramfs" | cut -f1); "; done))"
