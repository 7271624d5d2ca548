#!/usr/bin/env bash
# Unpacks a Debian root filesystem for one image role and architecture:
#   debian.sh PACKAGES ARCH OUTDIR
# PACKAGES is a file of package names (hack/images/*.packages, one a line, # comments).
# Their dependency closure (no recommends) is resolved and downloaded with apt-get into a
# cache of its own (IMAGES_CACHE, default ~/.cache/anvil/images, one folder per
# architecture, never the machine's own apt state; its status file is empty, so apt takes
# nothing as installed and fetches the whole closure), each .deb is unpacked with
# dpkg-deb -x into OUTDIR/rootfs in name order, and OUTDIR/VERSIONS lists
# "ARCH PACKAGE VERSION SHA256" of every .deb used (also put at /usr/share/anvil/VERSIONS
# in the root). The package lists are refreshed when older than a day
# (IMAGES_LISTS_MAX_AGE minutes), so a rebuild from the cache downloads nothing.
#
# Maintainer scripts do not run. What the roles need from them is done here (see fixups);
# documentation, man pages and translations are dropped (a container never reads them).
set -euo pipefail
shopt -s inherit_errexit

if [ $# -ne 3 ]; then
	echo "usage: $0 PACKAGES ARCH OUTDIR" >&2
	exit 2
fi
list=$(realpath "$1") arch=$2 out=$(realpath -m "$3")
here=$(cd "$(dirname "$0")" && pwd)
cache=${IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil/images}
max_age=${IMAGES_LISTS_MAX_AGE:-1440}

# begin_build (tools, cache lock, $work) and apt_opts (per-architecture apt state).
# shellcheck source=hack/testos/archive.sh
source "$here/../testos/archive.sh"
begin_build images apt-get dpkg-deb flock sha256sum
# shellcheck disable=SC2207
opts=($(apt_opts "$arch"))

mapfile -t packages < <(sed 's/#.*//' "$list" | tr -s ' \t' '\n' | sed '/^$/d')
[ ${#packages[@]} -gt 0 ] || { echo "images: $list names no package" >&2; exit 1; }

# apt keeps an unchanged list's old time, so a marker says when the lists were last refreshed.
updated=$cache/$arch/lists-updated
if [ -z "$(find "$updated" -mmin "-$max_age" 2>/dev/null)" ]; then
	apt-get "${opts[@]}" -qq update >&2
	touch "$updated"
fi

# The closure, as "PACKAGE VERSION" lines: what apt would install on an empty system.
closure=$work/closure
apt-get "${opts[@]}" -oDebug::NoLocking=1 -s --no-install-recommends install "${packages[@]}" |
	sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1 \2/p' | LC_ALL=C sort >"$closure"
[ -s "$closure" ] || { echo "images: apt resolved nothing for ${packages[*]} ($arch)" >&2; exit 1; }
apt-get "${opts[@]}" -qq --download-only --no-install-recommends install "${packages[@]}" >&2

rm -rf "$out"
mkdir -p "$out/rootfs"
archives=$cache/$arch/apt/archives
while read -r pkg ver; do
	# apt names a .deb PACKAGE_VERSION_ARCH.deb with the epoch's colon escaped.
	deb=""
	for a in "$arch" all; do
		f=$archives/${pkg}_${ver//:/%3a}_$a.deb
		[ -f "$f" ] && deb=$f && break
	done
	[ -n "$deb" ] || { echo "images: $pkg $ver ($arch) was not downloaded into $archives" >&2; exit 1; }
	dpkg-deb -x "$deb" "$out/rootfs"
	echo "$arch $pkg $ver $(sha256sum <"$deb" | cut -d' ' -f1)" >>"$out/VERSIONS"
done <"$closure"

# shellcheck source=hack/images/fixups.sh
source "$here/fixups.sh"
fixups "$out/rootfs"
mkdir -p "$out/rootfs/usr/share/anvil"
cp "$out/VERSIONS" "$out/rootfs/usr/share/anvil/VERSIONS"
echo "images: $(basename "$list" .packages) $arch: $(wc -l <"$out/VERSIONS") packages, $(du -sh "$out/rootfs" | cut -f1)" >&2
