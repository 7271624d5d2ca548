package nocloud

import (
	"fmt"
	"os"
	"path/filepath"
)

// VolumeID is the label cloud-init's NoCloud data source looks for.
const VolumeID = "cidata"

// Seed is what a NoCloud seed holds: user-data, meta-data and, when set, network-config.
type Seed struct {
	UserData, MetaData []byte
	// NetworkConfig is left out of the seed when nil (cloud-init's fallback then configures
	// the first NIC).
	NetworkConfig []byte
}

// WriteISO writes a NoCloud seed to path. It writes a temporary file beside path and
// renames it, so path is either absent or complete.
func WriteISO(path string, seed Seed) error {
	files := []isoFile{
		{name: "meta-data", data: seed.MetaData},
		{name: "user-data", data: seed.UserData},
	}
	if seed.NetworkConfig != nil {
		files = append(files, isoFile{name: "network-config", data: seed.NetworkConfig})
	}
	image, err := buildISO(VolumeID, files)
	if err != nil {
		return fmt.Errorf("building the NoCloud seed: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nocloud-*.iso")
	if err != nil {
		return fmt.Errorf("writing the NoCloud seed: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(image); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the NoCloud seed %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the NoCloud seed %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing the NoCloud seed: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the NoCloud seed: %w", err)
	}
	return nil
}
