package nocloud

import (
	"fmt"
	"os"
	"path/filepath"
)

// VolumeID is the label cloud-init's NoCloud data source looks for.
const VolumeID = "cidata"

// WriteISO writes a NoCloud seed holding userData and metaData to path. It writes a
// temporary file beside path and renames it, so path is either absent or complete.
func WriteISO(path string, userData, metaData []byte) error {
	image, err := buildISO(VolumeID, []isoFile{
		{name: "meta-data", data: metaData},
		{name: "user-data", data: userData},
	})
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
