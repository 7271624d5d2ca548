#!/usr/bin/env bash
# Builds OUTFILE: the EFI system partition image Ironic puts into the UEFI boot ISOs it
# builds for virtual-media deploys ([DEFAULT] esp_image, set by internal/ironic). It is a
# FAT image holding EFI/BOOT/BOOT<ARCH>.EFI for each architecture in hack/esp/packages: a
# standalone GRUB whose embedded config (embedded.cfg) reads the grub.cfg Ironic writes on
# the ISO. The GRUB modules come from the pinned Debian packages, downloaded into the test
# OS's package cache with the same archive logic (hack/testos/archive.sh); grub-mkimage,
# mkfs.vfat and mcopy come from make deps. The same packages give a byte-identical image.
set -euo pipefail
shopt -s inherit_errexit

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTFILE" >&2
	exit 2
fi
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
cache=${TESTOS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anvil/testos}

# shellcheck source=hack/testos/archive.sh
source "$here/../testos/archive.sh"
begin_build esp apt-get apt-cache dpkg-deb flock sha256sum grub-mkimage mkfs.vfat mmd mcopy

# GRUB's name for an architecture's EFI platform, and the removable-media boot file the
# UEFI specification gives it.
grub_target() {
	case $1 in
	arm64) echo arm64-efi ;;
	amd64) echo x86_64-efi ;;
	*) echo "esp: no GRUB target for $1" >&2; exit 1 ;;
	esac
}
boot_file() {
	case $1 in
	arm64) echo BOOTAA64.EFI ;;
	amd64) echo BOOTX64.EFI ;;
	esac
}

# What the embedded config needs: reading the ISO (iso9660 on the CD, or a partition of a
# hybrid image), finding the file, and booting a Linux kernel with an initramfs.
modules=(iso9660 part_gpt part_msdos fat search search_fs_file configfile normal echo linux gzio)

stamp=$work/stamp
touch -d 2020-01-01T00:00:00Z "$stamp"
mkdir -p "$work/efi"
echo "# Debian packages this ESP was built from: ARCH PACKAGE VERSION SHA256-OF-DEB" >"$work/VERSIONS"
while read -r a pkg ver; do
	mkdir -p "$cache/$a/debs"
	deb=$(fetch "$a" "$pkg" "$ver")
	root=$work/$a
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	echo "$a $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(sha256sum "$deb" | cut -d' ' -f1)" >>"$work/VERSIONS"
	target=$(grub_target "$a")
	grub-mkimage -O "$target" -d "$root/usr/lib/grub/$target" -c "$here/embedded.cfg" -p /boot/grub \
		-o "$work/efi/$(boot_file "$a")" "${modules[@]}"
	touch -r "$stamp" "$work/efi/$(boot_file "$a")"
done < <(grep -v '^#' "$here/packages")

# 8 MiB: room for a loader per architecture; --invariant fixes the volume id and times.
img=$work/esp.img
mkfs.vfat --invariant -n ANVIL-ESP -C "$img" 8192 >/dev/null
# Fixed times for the folders mmd makes (mcopy -m keeps the files' own).
export MTOOLS_SKIP_CHECK=1 SOURCE_DATE_EPOCH=1577836800
mmd -i "$img" ::/EFI ::/EFI/BOOT
for f in "$work"/efi/*; do
	mcopy -m -i "$img" "$f" ::/EFI/BOOT/
done

mkdir -p "$(dirname "$out")"
install -m 0644 "$work/VERSIONS" "$out.VERSIONS"
install -m 0644 "$img" "$out.new"
mv "$out.new" "$out"
echo "esp: built $out ($(ls "$work/efi" | tr '\n' ' '))"
