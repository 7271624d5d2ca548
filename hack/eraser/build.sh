#!/usr/bin/env bash
# Builds anvil's disk eraser for amd64 and arm64 into OUTDIR: OUTDIR/ARCH/{kernel,initramfs,
# cmdline} and OUTDIR/VERSIONS. It is the test OS's build (hack/testos/build.sh: the same
# pinned cloud kernel and busybox, the same package cache, byte-identical output for the same
# inputs) with this folder's rootfs/ (an /init that erases the disks and powers off) and
# module list (the disk drivers).
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../testos/build.sh" "$1" "$here/rootfs" "$here/modules"
