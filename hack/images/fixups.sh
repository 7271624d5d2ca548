# shellcheck shell=bash
# What the images' roles need from Debian's maintainer scripts, which dpkg-deb -x does not
# run, done on an unpacked root; sourced by debian.sh.

# fixups ROOT drops what a container never reads and does the maintainer scripts' work.
fixups() {
	local root=$1
	rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,linda,bug,bash-completion} \
		"$root"/usr/share/doc-base "$root"/usr/share/common-licenses
	# ca-certificates' postinst (update-ca-certificates) builds the bundle every TLS client reads.
	if [ -d "$root/usr/share/ca-certificates/mozilla" ]; then
		mkdir -p "$root/etc/ssl/certs"
		find "$root/usr/share/ca-certificates/mozilla" -name '*.crt' | LC_ALL=C sort |
			xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
	fi
}
