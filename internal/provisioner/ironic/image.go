package ironic

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Keys of instance_info. Ironic's ramdisk deploy reads kernel, ramdisk and
// ramdisk_kernel_arguments; it has no checksum fields for them (anvil checks the files
// before deploying), so their checksums are kept under anvil's own keys, for adoption.
const (
	infoKernel          = "kernel"
	infoRamdisk         = "ramdisk"
	infoKernelArguments = "ramdisk_kernel_arguments"
	infoKernelChecksum  = "anvil_kernel_checksum"
	infoRamdiskChecksum = "anvil_ramdisk_checksum"
	infoCapabilities    = "capabilities"
	// infoRequest is the Deployment's token: which request the deployment carried out.
	// Not named "..._token": Ironic's API masks such keys (oslo's mask_dict_password).
	infoRequest = "anvil_deploy_request"
)

// instanceInfo is what Ironic deploys (or adopts) img as, booted in mode: a disk image's
// URL, its checksum as Ironic's os_hash fields (sha256 and stronger) or image_checksum
// (anything else) and its disk format; or a kernel and ramdisk with their command line.
func instanceInfo(img provisioner.Image, mode provisioner.BootMode) (map[string]any, error) {
	info := map[string]any{}
	switch mode {
	case "":
	case provisioner.BootModeUEFI, provisioner.BootModeLegacy:
		info[infoCapabilities] = map[string]any{"boot_mode": string(mode)}
	default:
		return nil, fmt.Errorf("boot mode %q is not uefi or bios: %w", mode, provisioner.ErrInvalid)
	}
	if img.Ramdisk() {
		if img.URL != "" || img.Initramfs == nil || img.Kernel.URL == "" || img.Initramfs.URL == "" {
			return nil, fmt.Errorf("a kernel needs an initramfs and no disk image: %w", provisioner.ErrInvalid)
		}
		info[infoKernel], info[infoKernelChecksum] = img.Kernel.URL, img.Kernel.Checksum
		info[infoRamdisk], info[infoRamdiskChecksum] = img.Initramfs.URL, img.Initramfs.Checksum
		if img.KernelArguments != "" {
			info[infoKernelArguments] = img.KernelArguments
		}
		return info, nil
	}
	if img.URL == "" {
		return nil, fmt.Errorf("no image URL: %w", provisioner.ErrInvalid)
	}
	info["image_source"] = img.URL
	if img.Checksum != "" {
		algo, value, ok := strings.Cut(img.Checksum, ":")
		if !ok || value == "" {
			return nil, fmt.Errorf("image checksum %q is not <algorithm>:<hex>: %w", img.Checksum, provisioner.ErrInvalid)
		}
		switch algo {
		case "sha256", "sha512":
			info["image_os_hash_algo"] = algo
			info["image_os_hash_value"] = value
		case "md5":
			info["image_checksum"] = value
		default:
			return nil, fmt.Errorf("image checksum algorithm %q is not supported (sha256, sha512, md5): %w", algo, provisioner.ErrInvalid)
		}
	}
	switch img.Format {
	case "":
	case "raw", "qcow2":
		info["image_disk_format"] = img.Format
	default:
		return nil, fmt.Errorf("image format %q is not raw or qcow2: %w", img.Format, provisioner.ErrInvalid)
	}
	return info, nil
}

// deploymentInfo is d's instance_info, its token included, and its config drive.
func deploymentInfo(d provisioner.Deployment) (info, cd map[string]any, err error) {
	if info, err = instanceInfo(d.Image, d.BootMode); err != nil {
		return nil, nil, err
	}
	if d.Token != "" {
		info[infoRequest] = d.Token
	}
	if cd, err = configDrive(d.ConfigDrive); err != nil {
		return nil, nil, err
	}
	return info, cd, nil
}

// tokenOf is the token of the deployment instance_info describes ("" for none).
func tokenOf(info map[string]any) string {
	s, _ := info[infoRequest].(string)
	return s
}

// imageOf reads back what instanceInfo wrote.
func imageOf(info map[string]any) provisioner.Image {
	str := func(k string) string { s, _ := info[k].(string); return s }
	if k := str(infoKernel); k != "" {
		return provisioner.Image{
			Kernel:          &provisioner.File{URL: k, Checksum: str(infoKernelChecksum)},
			Initramfs:       &provisioner.File{URL: str(infoRamdisk), Checksum: str(infoRamdiskChecksum)},
			KernelArguments: str(infoKernelArguments),
		}
	}
	img := provisioner.Image{URL: str("image_source"), Format: str("image_disk_format")}
	if v := str("image_os_hash_value"); v != "" {
		img.Checksum = str("image_os_hash_algo") + ":" + v
	} else if v := str("image_checksum"); v != "" {
		img.Checksum = "md5:" + v
	}
	return img
}

// sameImage: a deploy of want is the one already on or going to the node.
func sameImage(have, want provisioner.Image) bool {
	if want.Ramdisk() {
		return have.Ramdisk() && sameFile(have.Kernel, want.Kernel) && sameFile(have.Initramfs, want.Initramfs) &&
			have.KernelArguments == want.KernelArguments
	}
	return !have.Ramdisk() && have.URL == want.URL && (want.Checksum == "" || have.Checksum == want.Checksum)
}

func sameFile(have, want *provisioner.File) bool {
	return have != nil && want != nil && have.URL == want.URL && (want.Checksum == "" || have.Checksum == want.Checksum)
}

// deployInterface is the deploy interface a redfish node needs for img: ramdisk boots a
// kernel and initramfs from an ISO over virtual media; direct writes a disk image through
// an agent ramdisk.
func deployInterface(img provisioner.Image) string {
	if img.Ramdisk() {
		return "ramdisk"
	}
	return "direct"
}

// configDrive is the JSON config drive Ironic builds the ISO from (API 1.56+); nil for none.
func configDrive(cd *provisioner.ConfigDrive) (map[string]any, error) {
	if cd == nil {
		return nil, nil
	}
	out := map[string]any{}
	if len(cd.UserData) > 0 {
		// Ironic takes user_data as a JSON string; binary user data would be mangled.
		if !utf8.Valid(cd.UserData) {
			return nil, fmt.Errorf("config drive user data is not UTF-8 text: %w", provisioner.ErrInvalid)
		}
		out["user_data"] = string(cd.UserData)
	}
	if cd.MetaData != nil {
		out["meta_data"] = cd.MetaData
	}
	if cd.NetworkData != nil {
		out["network_data"] = cd.NetworkData
	}
	return out, nil
}
