#!/usr/bin/env bash
# Installs the Debian packages anvil's tests and demo need, and only those that are
# missing, so running it again is cheap. Shared by `make test` and `make demo`.
set -euo pipefail

# One package a line, with why. Later capabilities add theirs here.
packages=(
	git    # make test checks generated files with git diff
	make
	ca-certificates
	protobuf-compiler # protoc, for the Machine Runtime Interface's generated code
	qemu-system-x86   # the qemu runtime's amd64 VMs
	qemu-system-arm   # the qemu runtime's arm64 VMs
	qemu-utils        # qemu-img, for qcow2 overlays
	cpio              # packs the test OS's initramfs (hack/testos)
	xz-utils          # kernel modules may come xz-compressed
	# Ironic drives bare-metal servers (internal/ironic runs it as one `ironic` process):
	# ironic-api brings the API and ironic-dbsync, ironic-conductor the conductor with
	# the redfish (python3-sushy) and ipmi (ipmitool) drivers.
	ironic-api
	ironic-conductor
	# ironic-inspector (and ironic-inspector-dbsync): in-band inspection of ipmi servers,
	# run by internal/ironic beside Ironic.
	ironic-inspector
	# Ironic's redfish-virtual-media boot builds a BIOS boot ISO of a kernel + initramfs
	# image (ramdisk deploy) for emulated servers (internal/bmcemu): mkisofs and isolinux.
	genisoimage
	isolinux
	syslinux-common
	# Emulated servers that boot UEFI (arm64: AAVMF; amd64 when asked: OVMF); the UEFI boot
	# ISOs Ironic builds carry an EFI system partition made by hack/esp/build.sh with
	# grub-mkimage, mkfs.vfat and mtools.
	qemu-efi-aarch64
	ovmf
	grub-common
	dosfstools
	mtools
	# The real Kubernetes node of test/cluster (docs/cluster.md): containerd and runc run the
	# Pods, the CNI plugins (bridge, host-local, loopback in /usr/lib/cni) wire them up,
	# iptables is what kube-proxy and the harness's egress guard program (nft lists and
	# deletes the tables they made), and kube-proxy clears stale UDP flows with conntrack.
	containerd
	runc
	containernetworking-plugins
	iptables
	nftables
	conntrack
	# The Debian image (hack/debian, make debian): debootstrap unpacks the root from a local
	# mirror that dpkg-scanpackages indexes; mke2fs and debugfs make its filesystem and read
	# the kernel back out of it.
	debootstrap
	dpkg-dev
	e2fsprogs
	zstd # compresses the RAM form
	# The QEMU runtime's switch (internal/netswitch) is tested against the DHCP clients
	# guests run: busybox's udhcpc (the test OS) and ISC dhclient (Debian's ifupdown);
	# systemd-networkd comes with systemd.
	busybox
	isc-dhcp-client
	# anvil ui's pages are tested in a real browser (test/ui, driven over the DevTools
	# protocol with chromedp): Chromium's headless shell, no desktop needed.
	chromium-headless-shell
	curl # hack/fresh-check.sh asks the demo's fleet UI for its page
)

# The qemu runtime, run as root, starts QEMU as this unprivileged user (-runas; its
# --qemu-user flag): a guest that escapes into QEMU is not root on the host.
qemu_user=anvil-qemu
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
ensure_qemu_user() {
	id -u "$qemu_user" >/dev/null 2>&1 || $sudo useradd --system --no-create-home --shell /usr/sbin/nologin "$qemu_user"
}

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	ensure_qemu_user
	exit 0
fi

echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
ensure_qemu_user
