// Package testos finds the test OS that `make testos` builds into bin/testos (a Debian
// cloud kernel and a busybox initramfs per architecture, see docs/testos.md) and states its
// guest contract for the tests that boot it. Its own tests boot each architecture by hand
// with QEMU, once with Ignition and once with a NoCloud seed.
//
// When the files are missing it fails the test with "run make testos": it never skips, and
// it never builds them itself.
//
// The QEMU command lines that boot it, which the qemu runtime builds its own from (TCG; KVM
// hangs on this kind of machine). ARCH is amd64 or arm64; every flag is needed as written:
//
//	qemu-system-x86_64 -machine q35 -accel tcg -m 256 -smp 1     # amd64
//	qemu-system-aarch64 -machine virt -cpu cortex-a57 -accel tcg -m 256 -smp 1   # arm64
//	  -nodefaults -no-user-config -display none
//	  -kernel bin/testos/ARCH/kernel -initrd bin/testos/ARCH/initramfs
//	  -append "$(cat bin/testos/ARCH/cmdline)"
//	  -serial file:serial.log                          # the console: ttyS0 / ttyAMA0
//	  -qmp unix:qmp.sock,server=on,wait=off            # system_powerdown, quit, query-status
//	  -netdev user,id=net0 -device virtio-net-pci,netdev=net0
//
// and one of the two first-boot config sources:
//
//	-fw_cfg name=opt/com.coreos/config,file=config.ign                  # Ignition
//	-drive file=seed.iso,if=none,id=seed,format=raw,readonly=on \
//	  -device virtio-blk-pci,drive=seed                                 # NoCloud (nocloud.WriteISO)
//
// Once it has read its config the guest prints ReadyLine on the console. QMP
// system_powerdown presses the power button: the guest shuts down and QEMU exits with
// status 0 (ACPI button on amd64, the device tree's GPIO key on arm64).
package testos
