# shellcheck shell=bash
# The test OS build's dealings with Debian's archive, sourced by build.sh (and by its test,
# test/testos/archive_test.go, which puts a fake apt-cache and apt-get on PATH).
#
# The caller sets:
#   cache  the package cache folder (one subfolder per architecture)
#   work   a scratch folder that lives as long as one build (begin_build makes it)
#
# fetch ARCH PACKAGE VERSION prints the path of the .deb to use for a pin. It never calls
# itself: a pin resolves once to what the archive has, and a replacement, once found, is
# remembered in the cache so that a later build neither asks the archive nor warns again.

# begin_build NAME TOOL... starts a build that uses the cache: it fails naming any TOOL
# missing, takes the cache's lock (one build at a time shares it; held until the script
# exits) and makes the scratch folder $work, removed on exit.
begin_build() {
	local name=$1 tool
	shift
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "$name: $tool is missing: run make deps" >&2; exit 1; }
	done
	mkdir -p "$cache"
	exec 9>"$cache/lock"
	flock 9
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
}

# apt_opts ARCH prints apt options that point every list, cache and status file at ARCH's
# own folder in the cache, never at the machine's own apt state.
apt_opts() {
	local a=$1 d=$cache/$1
	mkdir -p "$d/lists/partial" "$d/apt/archives/partial" "$d/debs"
	touch "$d/status"
	echo "-oAPT::Architecture=$a -oAPT::Architectures=$a -oDir::State::Lists=$d/lists" \
		"-oDir::Cache=$d/apt -oDir::State::status=$d/status -oAPT::Sandbox::User=root"
}

# update_lists refreshes ARCH's package lists once per build (fetch runs in subshells, so a
# marker file remembers it).
update_lists() {
	local a=$1
	[ -e "$work/updated-$a" ] && return
	# shellcheck disable=SC2046
	apt-get $(apt_opts "$a") -qq update >&2
	touch "$work/updated-$a"
}

# archive_has ARCH PACKAGE VERSION succeeds when ARCH's lists hold exactly PACKAGE=VERSION.
# madison right-aligns its first two columns (a short name or version gets leading spaces),
# so every field is trimmed before it is compared.
archive_has() {
	# shellcheck disable=SC2046
	apt-cache $(apt_opts "$1") madison "$2" 2>/dev/null | awk -F'|' -v pkg="$2" -v ver="$3" '
		function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
		trim($1) == pkg && trim($2) == ver { found = 1 }
		END { exit !found }'
}

# candidate ARCH PACKAGE prints the archive's current version of PACKAGE, or nothing.
candidate() {
	# shellcheck disable=SC2046
	apt-cache $(apt_opts "$1") policy "$2" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '^(none)$' || true
}

# replacement ARCH PACKAGE prints "PACKAGE VERSION" of what the archive offers instead of a
# pin it no longer has: the package's current version, or for a cloud kernel whose ABI
# package is gone the one linux-image-cloud-ARCH depends on now. Nothing when there is none.
replacement() {
	local a=$1 pkg=$2 ver
	ver=$(candidate "$a" "$pkg")
	if [ -z "$ver" ] && [[ $pkg == linux-image-*-cloud-$a ]]; then
		# shellcheck disable=SC2046
		pkg=$(apt-cache $(apt_opts "$a") depends "linux-image-cloud-$a" 2>/dev/null |
			sed -n "s/^ *Depends: *\(linux-image-[^ ]*-cloud-$a\) *\$/\1/p" | head -n1)
		[ -n "$pkg" ] && ver=$(candidate "$a" "$pkg")
	fi
	[ -n "$ver" ] && echo "$pkg $ver"
	return 0
}

# cached_deb ARCH PACKAGE VERSION prints the cached .deb of PACKAGE=VERSION, if there is one
# (named for ARCH, or "all" for an architecture-independent package).
cached_deb() {
	local a=$1 pkg=$2 ver=$3 deb
	for deb in "$cache/$a/debs/${pkg}"_*_"$a".deb "$cache/$a/debs/${pkg}"_*_all.deb; do
		if [ -f "$deb" ] && [ "$(dpkg-deb -f "$deb" Package)" = "$pkg" ] &&
			[ "$(dpkg-deb -f "$deb" Version)" = "$ver" ]; then
			echo "$deb"
			return
		fi
	done
}

# download ARCH PACKAGE VERSION fetches PACKAGE=VERSION into the cache and prints its path.
download() {
	local a=$1 pkg=$2 ver=$3 tmp=$work/download-$1 deb
	mkdir -p "$tmp"
	# shellcheck disable=SC2046
	(cd "$tmp" && apt-get $(apt_opts "$a") -qq download "$pkg=$ver" >&2)
	deb=$(find "$tmp" -maxdepth 1 \( -name "${pkg}_*_${a}.deb" -o -name "${pkg}_*_all.deb" \) | head -n1)
	[ -n "$deb" ] || { echo "testos: apt-get download $pkg=$ver ($a) left no .deb" >&2; exit 1; }
	mv "$deb" "$cache/$a/debs/"
	echo "$cache/$a/debs/$(basename "$deb")"
}

# fetch ARCH PACKAGE VERSION prints the path of the .deb to build from: the pinned one, or
# when the archive has dropped it, its replacement, with one warning that names the pin to
# put in hack/testos/packages. VERSIONS always names what was really used.
fetch() {
	local a=$1 pkg=$2 ver=$3 deb use replaced=$cache/$1/replacements
	deb=$(cached_deb "$a" "$pkg" "$ver")
	if [ -n "$deb" ]; then
		echo "$deb"
		return
	fi
	# A replacement found by an earlier build is used again without asking the archive.
	use=$(awk -v pkg="$pkg" -v ver="$ver" '$1 == pkg && $2 == ver { print $3, $4; exit }' "$replaced" 2>/dev/null || true)
	if [ -n "$use" ]; then
		# shellcheck disable=SC2086
		deb=$(cached_deb "$a" $use)
		if [ -n "$deb" ]; then
			echo "testos: WARNING: $pkg $ver ($a) is no longer in the archive; using $use, downloaded earlier:" \
				"put it in hack/testos/packages" >&2
			echo "$deb"
			return
		fi
	fi
	update_lists "$a"
	if archive_has "$a" "$pkg" "$ver"; then
		download "$a" "$pkg" "$ver"
		return
	fi
	use=$(replacement "$a" "$pkg")
	if [ -z "$use" ] || [ "$use" = "$pkg $ver" ]; then
		# The same package and version is no replacement: the archive contradicts itself.
		echo "testos: $pkg $ver ($a) is not in the archive and has no replacement" >&2
		exit 1
	fi
	echo "testos: WARNING: $pkg $ver ($a) is no longer in the archive; using $use:" \
		"put it in hack/testos/packages" >&2
	# shellcheck disable=SC2086
	deb=$(download "$a" $use)
	echo "$pkg $ver $use" >>"$replaced"
	echo "$deb"
}
