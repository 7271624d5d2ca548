package ironic

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// instanceInfo is what Ironic deploys (or adopts) img as: the image URL, its checksum as
// Ironic's os_hash fields (sha256 and stronger) or image_checksum (anything else), and
// its disk format.
func instanceInfo(img provisioner.Image) (map[string]any, error) {
	if img.URL == "" {
		return nil, fmt.Errorf("no image URL: %w", provisioner.ErrInvalid)
	}
	info := map[string]any{"image_source": img.URL}
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

// imageOf reads back what instanceInfo wrote.
func imageOf(info map[string]any) provisioner.Image {
	str := func(k string) string { s, _ := info[k].(string); return s }
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
	return have.URL == want.URL && (want.Checksum == "" || have.Checksum == want.Checksum)
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
