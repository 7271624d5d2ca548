package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"sigs.k8s.io/yaml"
)

// DefaultMetadataFiles are where the test OS mounts its first-boot metadata: a NoCloud
// seed's meta-data (YAML, or JSON which cloud-init also takes) and a config drive's
// meta_data.json. The first that exists is read.
var DefaultMetadataFiles = []string{
	"/run/testos/seed/meta-data",
	"/run/testos/configdrive/openstack/latest/meta_data.json",
}

// Metadata is what the agent takes from first-boot metadata when its flags do not say.
type Metadata struct {
	// Hostname is local-hostname (else hostname): the Node's name.
	Hostname string
	// ProviderID is provider-id (or providerid): the Node's spec.providerID, which Cluster
	// API matches to its Machine's. A config drive carries it in "meta", where OpenStack and
	// anvil's metal runtime put the Machine's own metadata (its top-level keys are the
	// drive's); a NoCloud meta-data at the top level.
	ProviderID string
}

// metadataKeys are the keys read for each field, first found wins.
var (
	hostnameKeys   = []string{"local-hostname", "hostname"}
	providerIDKeys = []string{"provider-id", "providerid"}
)

// ReadMetadata parses the first of files that exists and returns it with that file's path;
// none existing is no error (empty Metadata, path "").
func ReadMetadata(files []string) (Metadata, string, error) {
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Metadata{}, f, err
		}
		md, err := ParseMetadata(raw)
		if err != nil {
			return Metadata{}, f, fmt.Errorf("%s: %w", f, err)
		}
		return md, f, nil
	}
	return Metadata{}, "", nil
}

// ParseMetadata reads a NoCloud meta-data (YAML or JSON) or a config drive's meta_data.json
// (JSON, a subset of YAML): a map whose keys of interest hold strings.
func ParseMetadata(raw []byte) (Metadata, error) {
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return Metadata{}, fmt.Errorf("not a YAML or JSON map: %w", err)
	}
	var md Metadata
	var err error
	if md.Hostname, err = firstString(m, hostnameKeys); err != nil {
		return Metadata{}, err
	}
	if md.ProviderID, err = firstString(m, providerIDKeys); err != nil {
		return Metadata{}, err
	}
	if meta, ok := m["meta"].(map[string]any); ok && md.ProviderID == "" {
		if md.ProviderID, err = firstString(meta, providerIDKeys); err != nil {
			return Metadata{}, fmt.Errorf("meta: %w", err)
		}
	}
	return md, nil
}

func firstString(m map[string]any, keys []string) (string, error) {
	for _, k := range keys {
		v, ok := m[k]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s is %v, not a string: quote it", k, v)
		}
		return s, nil
	}
	return "", nil
}
