package buildagent

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/anvil-dev/anvil/internal/imagebuild/containerfile"
)

// JobPath is where a builder's first-boot config puts its job.
const JobPath = "/etc/anvil/build-job.json"

// Job is one architecture's build, as the controller writes it into the builder Machine's
// first-boot config.
type Job struct {
	Architecture string `json:"architecture"`
	// Base is the base's entry for the architecture, by digest, at the registry address
	// the builder reaches.
	Base string `json:"base"`
	// Output is the repository the image and its log are pushed to (same address rules).
	Output string `json:"output"`
	// Tag names the image in Output: its input hash's tag.
	Tag string `json:"tag"`
	// LogTag names this attempt's log artifact in Output.
	LogTag string `json:"logTag"`
	// PlainHTTP lists registry hosts spoken to without TLS (a forward on the guest network).
	PlainHTTP []string `json:"plainHTTP,omitempty"`
	// DockerConfig is a .dockerconfigjson with the credentials for Base and Output.
	DockerConfig []byte `json:"dockerConfig,omitempty"`
	// Program is the recipe for the architecture, interpreted by the controller.
	Program containerfile.Program `json:"program"`
	// Context holds the files the Program's COPY steps read.
	Context map[string][]byte `json:"context,omitempty"`
	// KernelCommandLine replaces the base's when set.
	KernelCommandLine *string `json:"kernelCommandLine,omitempty"`
	// SourceDateEpoch is every packed file's time.
	SourceDateEpoch int64 `json:"sourceDateEpoch"`
	// RootDiskBytes is the size of the scratch disk the builder has for a base with a disk
	// root (the base disk's own size); 0 for an initramfs root.
	RootDiskBytes int64 `json:"rootDiskBytes,omitempty"`
	// PackageProxy is the HTTP proxy (host:port) the builder's network offers for package
	// downloads; RUN steps get it as http_proxy. Empty: none.
	PackageProxy string `json:"packageProxy,omitempty"`
}

// stepEnv is what every RUN step gets unless the recipe sets it itself: the package proxy.
func (j *Job) stepEnv() []string {
	if j.PackageProxy == "" {
		return nil
	}
	url := "http://" + j.PackageProxy
	return []string{"http_proxy=" + url, "HTTP_PROXY=" + url}
}

// ParseJob reads a job and refuses one that cannot run.
func ParseJob(raw []byte) (*Job, error) {
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("build job: %w", err)
	}
	switch {
	case j.Architecture == "":
		return nil, fmt.Errorf("build job: no architecture")
	case j.Base == "" || j.Output == "" || j.Tag == "" || j.LogTag == "":
		return nil, fmt.Errorf("build job: base, output, tag and logTag are required")
	case j.Program.Architecture != j.Architecture:
		return nil, fmt.Errorf("build job: the program is for %q, the job for %q", j.Program.Architecture, j.Architecture)
	}
	return &j, nil
}

// IgnitionConfig is a builder's first-boot config: the job, written to JobPath.
func IgnitionConfig(job []byte) ([]byte, error) {
	return json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{map[string]any{
			"path": JobPath, "mode": 0o600, "overwrite": true,
			"contents": map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(job)},
		}}},
	})
}
