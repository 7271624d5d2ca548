#!/usr/bin/env bash
# Builds the test OS for amd64 and arm64 into OUTDIR: OUTDIR/ARCH/{kernel,initramfs,cmdline}
# and OUTDIR/VERSIONS. With ROOTFS and MODULES it builds another initramfs the same way from
# the same kernel and busybox (the disk eraser, hack/eraser/build.sh): ROOTFS replaces
# rootfs/ and MODULES the module list. Everything comes from the Debian packages pinned in
# hack/testos/packages (a cloud kernel and busybox-static per architecture) plus rootfs/, so
# the same packages always give byte-identical files. Packages are downloaded with apt-get
# into a cache of their own (TESTOS_CACHE, default ~/.cache/anvil/testos), one package-list
# folder per architecture, never touching the machine's own apt state; a rebuild downloads
# nothing.
set -euo pipefail
shopt -s inherit_errexit # fetch runs in command substitutions

if [ $# -ne 1 ] && [ $# -ne 3 ]; then
	echo "usage: $0 OUTDIR [ROOTFS MODULES]" >&2
	exit 2
fi
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
rootfs=$here/rootfs modules=$here/modules name=testos
if [ $# -eq 3 ]; then
	rootfs=$(realpath "$2") modules=$(realpath "$3") name=$(basename "$(dirname "$rootfs")")
fi
cache=${TESTOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil/testos}
archs=(amd64 arm64)

# begin_build, apt_opts, update_lists and fetch: the archive lookups, with their own test.
# shellcheck source=hack/testos/archive.sh
source "$here/archive.sh"
begin_build "$name" apt-get apt-cache dpkg-deb cpio gzip flock sha256sum
for a in "${archs[@]}"; do mkdir -p "$cache/$a/debs"; done

# module_order prints, for the kernel modules tree MODDIR, the .ko files to load for the
# wanted modules, dependencies first. Modules the kernel has built in are left out.
module_order() {
	local moddir=$1
	declare -A path seen
	local f name
	while read -r f; do
		name=$(basename "$f" .ko)
		path[${name//-/_}]=$f
	done < <(find "$moddir/kernel" -name '*.ko' | LC_ALL=C sort)
	visit() {
		local m=$1 dep
		[ -n "${seen[$m]:-}" ] && return
		seen[$m]=1
		for dep in $(tr '\0' '\n' <"${path[$m]}" | sed -n 's/^depends=//p' | tr ',' ' '); do
			visit "${dep//-/_}"
		done
		echo "${path[$m]}"
	}
	local m
	while read -r m; do
		m=${m%%#*}
		m=${m//[[:space:]]/}
		[ -z "$m" ] && continue
		if [ -n "${path[$m]:-}" ]; then
			visit "$m"
		elif ! grep -q "/$m\.ko\$" "$moddir/modules.builtin"; then
			echo "$name: module $m is neither a module nor built into $(basename "$moddir")" >&2
			exit 1
		fi
	done <"$modules"
}

cmdline() {
	case $1 in
	amd64) echo "console=ttyS0 quiet" ;;
	arm64) echo "console=ttyAMA0 quiet" ;;
	esac
}

# Built beside OUTDIR and swapped in at the end, so a failed build leaves the old one whole.
new=$out.new
rm -rf "$new"
mkdir -p "$new"
trap 'rm -rf "$work" "$new"' EXIT
echo "# Debian packages this test OS was built from: ARCH PACKAGE VERSION SHA256-OF-DEB" >"$new/VERSIONS"
for a in "${archs[@]}"; do
	root=$work/$a/pkgs
	mkdir -p "$root"
	while read -r pa pkg ver; do
		[ "$pa" = "$a" ] || continue
		deb=$(fetch "$a" "$pkg" "$ver")
		dpkg-deb -x "$deb" "$root"
		echo "$a $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(sha256sum "$deb" | cut -d' ' -f1)" >>"$new/VERSIONS"
	done < <(grep -v '^#' "$here/packages")

	kernels=("$root"/boot/vmlinuz-*)
	[ ${#kernels[@]} -eq 1 ] || { echo "$name: expected one kernel for $a, found: ${kernels[*]}" >&2; exit 1; }
	release=${kernels[0]##*/vmlinuz-}

	stage=$work/$a/initramfs
	cp -r "$rootfs" "$stage"
	mkdir -p "$stage"/{bin,dev,proc,sys,run,tmp,var/log,lib/modules/testos}
	ln -s ../run "$stage/var/run"
	cp "$root/bin/busybox" "$stage/bin/busybox"
	ln -s busybox "$stage/bin/sh"
	module_order "$root/lib/modules/$release" >"$work/$a/modules"
	: >"$stage/lib/modules/testos/load-order"
	while read -r ko; do
		cp "$ko" "$stage/lib/modules/testos/"
		basename "$ko" >>"$stage/lib/modules/testos/load-order"
	done <"$work/$a/modules"
	echo "$release" >"$stage/lib/modules/testos/release"

	# Fixed modes, owners and times, and a sorted file list: the archive depends only on
	# the inputs.
	find "$stage" -type d -exec chmod 0755 {} +
	find "$stage" -type f -perm -u+x -exec chmod 0755 {} +
	find "$stage" -type f ! -perm -u+x -exec chmod 0644 {} +
	find "$stage" -exec touch -h -d @0 {} +
	mkdir -p "$new/$a"
	(cd "$stage" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --reproducible --quiet) | gzip -9 -n >"$new/$a/initramfs"
	install -m 0644 "${kernels[0]}" "$new/$a/kernel"
	cmdline "$a" >"$new/$a/cmdline"
done

rm -rf "$out.old"
[ -e "$out" ] && mv "$out" "$out.old"
mv "$new" "$out"
rm -rf "$out.old"
echo "$name: built $out ($(grep -v '^#' "$out/VERSIONS" | cut -d' ' -f1-3 | tr '\n' ';'))"
