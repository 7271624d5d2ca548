package ironic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func TestInstanceInfo(t *testing.T) {
	kernel := &provisioner.File{URL: "http://i/k", Checksum: "sha256:k"}
	initramfs := &provisioner.File{URL: "http://i/r", Checksum: "sha256:r"}
	for _, tc := range []struct {
		img  provisioner.Image
		mode provisioner.BootMode
		want map[string]any
	}{
		{provisioner.Image{URL: "http://i/a.raw", Checksum: "sha256:abc", Format: "raw"}, "", map[string]any{
			"image_source": "http://i/a.raw", "image_os_hash_algo": "sha256", "image_os_hash_value": "abc", "image_disk_format": "raw"}},
		{provisioner.Image{URL: "http://i/a.qcow2", Checksum: "md5:def", Format: "qcow2"}, provisioner.BootModeUEFI, map[string]any{
			"image_source": "http://i/a.qcow2", "image_checksum": "def", "image_disk_format": "qcow2",
			"capabilities": map[string]any{"boot_mode": "uefi"}}},
		{provisioner.Image{URL: "http://i/a"}, "", map[string]any{"image_source": "http://i/a"}},
		{provisioner.Image{Kernel: kernel, Initramfs: initramfs, KernelArguments: "console=ttyS0"}, provisioner.BootModeLegacy, map[string]any{
			"kernel": "http://i/k", "anvil_kernel_checksum": "sha256:k", "ramdisk": "http://i/r", "anvil_ramdisk_checksum": "sha256:r",
			"ramdisk_kernel_arguments": "console=ttyS0", "capabilities": map[string]any{"boot_mode": "bios"}}},
	} {
		got, err := instanceInfo(tc.img, tc.mode)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("instanceInfo(%+v) = %v, %v; want %v", tc.img, got, err, tc.want)
		}
		if back := imageOf(got); !reflect.DeepEqual(back, tc.img) {
			t.Errorf("imageOf(instanceInfo(%+v)) = %+v", tc.img, back)
		}
		if !sameImage(imageOf(got), tc.img) {
			t.Errorf("sameImage(imageOf(instanceInfo(%+v)), itself) = false", tc.img)
		}
	}
	for _, bad := range []provisioner.Image{{}, {URL: "u", Checksum: "abc"}, {URL: "u", Checksum: "crc:1"}, {URL: "u", Format: "vmdk"},
		{Kernel: kernel}, {URL: "u", Kernel: kernel, Initramfs: initramfs}} {
		if _, err := instanceInfo(bad, ""); !errors.Is(err, provisioner.ErrInvalid) {
			t.Errorf("instanceInfo(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := instanceInfo(provisioner.Image{URL: "u"}, "legacy"); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("boot mode legacy: %v, want ErrInvalid", err)
	}
}

// A kernel and initramfs are never the same deployment as a disk image, nor as another
// command line.
func TestSameImage(t *testing.T) {
	k, r := &provisioner.File{URL: "http://i/k", Checksum: "sha256:k"}, &provisioner.File{URL: "http://i/r", Checksum: "sha256:r"}
	ramdisk := provisioner.Image{Kernel: k, Initramfs: r, KernelArguments: "a"}
	disk := provisioner.Image{URL: "http://i/k", Checksum: "sha256:k"}
	otherArgs := ramdisk
	otherArgs.KernelArguments = "b"
	otherKernel := ramdisk
	otherKernel.Kernel = &provisioner.File{URL: "http://i/k2", Checksum: "sha256:k2"}
	for _, tc := range []struct {
		have, want provisioner.Image
		same       bool
	}{
		{ramdisk, ramdisk, true}, {disk, disk, true},
		{disk, ramdisk, false}, {ramdisk, disk, false},
		{ramdisk, otherArgs, false}, {ramdisk, otherKernel, false},
	} {
		if got := sameImage(tc.have, tc.want); got != tc.same {
			t.Errorf("sameImage(%+v, %+v) = %v, want %v", tc.have, tc.want, got, tc.same)
		}
	}
}

func TestConfigDrive(t *testing.T) {
	cd, err := configDrive(&provisioner.ConfigDrive{UserData: []byte("#cloud-config\n"), MetaData: map[string]any{"uuid": "u"}})
	if err != nil || cd["user_data"] != "#cloud-config\n" || cd["meta_data"] == nil || cd["network_data"] != nil {
		t.Errorf("configDrive = %v, %v", cd, err)
	}
	if cd, err := configDrive(nil); cd != nil || err != nil {
		t.Errorf("configDrive(nil) = %v, %v", cd, err)
	}
	if _, err := configDrive(&provisioner.ConfigDrive{UserData: []byte{0xff, 0xfe}}); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("binary user data: %v, want ErrInvalid", err)
	}
}
