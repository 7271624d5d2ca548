# shellcheck shell=bash
# What the images' roles need from Debian's maintainer scripts, which dpkg-deb -x does not
# run, done on an unpacked root; sourced by debian.sh.

# fixups ROOT drops what a container never reads (keeping the licences) and does the
# maintainer scripts' work.
fixups() {
	local root=$1
	# Each package's copyright file and the licence texts they point to stay: the images
	# redistribute GPL software (QEMU among it).
	if [ -d "$root/usr/share/doc" ]; then
		find "$root/usr/share/doc" -mindepth 1 -depth ! -name copyright ! -type d -delete
		find "$root/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
	fi
	rm -rf "$root"/usr/share/{man,info,locale,lintian,linda,bug,bash-completion} \
		"$root"/usr/share/doc-base
	# ca-certificates' postinst (update-ca-certificates) builds the bundle every TLS client reads.
	if [ -d "$root/usr/share/ca-certificates/mozilla" ]; then
		mkdir -p "$root/etc/ssl/certs"
		find "$root/usr/share/ca-certificates/mozilla" -name '*.crt' | LC_ALL=C sort |
			xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
	fi
}
