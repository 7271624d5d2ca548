package qemu

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/registrynet/registrynettest"
)

// withImagePolicy makes cfg pull (and read indexes) with opts, as the runtime command does.
func withImagePolicy(t *testing.T, cfg Config, opts osimage.CacheOptions) Config {
	t.Helper()
	cache, err := osimage.NewCache(filepath.Join(t.TempDir(), "cache"), opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Images, cfg.Index = cache, &imageref.Registry{Transport: opts.Network.Transport()}
	return cfg
}

// imagePulled waits for the machine's ImagePulled condition to be false with reason, and
// returns its message.
func imagePulled(t *testing.T, rt *Runtime, id, reason string) string {
	t.Helper()
	var msg string
	await(t, rt, id, "reported ImagePulled=False "+reason, func(m *mriv1alpha1.Machine) bool {
		for _, c := range m.GetStatus().GetConditions() {
			if c.Type == CondImagePulled && !c.Status && c.Reason == reason {
				msg = c.Message
				return true
			}
		}
		return false
	})
	return msg
}

// Attack: a tenant's Machine names an image on the pool host's loopback, its private
// network or the metadata service. The machine fails with RegistryRefused, naming the
// address and the flag that would allow it; no connection is made.
func TestMachineImagesOnNonPublicRegistriesAreRefused(t *testing.T) {
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	host, _, _ := strings.Cut(img.Reference, "/")
	rt := newRuntime(t, withImagePolicy(t, testConfig(t, computev1alpha1.ArchitectureAMD64), osimage.CacheOptions{}))
	for i, tc := range []struct{ reference, says string }{
		{img.Reference, "registry " + host + " is a loopback address: refused unless the pool allows it (--allow-registry " + host + ")"},
		{"10.0.0.7:5000/anvil/testos:test", "registry 10.0.0.7:5000 is a private address"},
		{"169.254.169.254/anvil/testos:test", "registry 169.254.169.254:443 is a link-local address"},
	} {
		spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
		spec.Image.Reference = tc.reference
		m := create(t, rt, "refused-"+string(rune('a'+i)), spec)
		if msg := imagePulled(t, rt, m.Metadata.Id, "RegistryRefused"); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: message %q, want it to say %q", tc.reference, msg, tc.says)
		}
		remove(t, rt, m.Metadata.Id)
		await(t, rt, m.Metadata.Id, "went away", gone)
	}
}

// Attack: a Machine's image is on a registry that accepts connections and never answers,
// to hold the pool's pull forever. The pull fails within the pool's timeout and the
// machine says why (and retries, as after any registry failure).
func TestMachineImageOnASilentRegistryFailsItsPull(t *testing.T) {
	silent := registrynettest.StartSilent(t)
	img := pushTestOS(t, computev1alpha1.ArchitectureAMD64)
	cfg := withImagePolicy(t, testConfig(t, computev1alpha1.ArchitectureAMD64),
		osimage.CacheOptions{Network: registrynet.Policy{Timeout: time.Second, Allow: registrynet.Loopback}})
	rt := newRuntime(t, cfg)
	spec := machineSpec(img, mriv1alpha1.Architecture_ARCHITECTURE_AMD64)
	spec.Image.Reference = silent.Host + "/anvil/testos:test"
	start := time.Now()
	m := create(t, rt, "silent", spec)
	msg := imagePulled(t, rt, m.Metadata.Id, "PullFailed")
	if !strings.Contains(msg, "timeout") {
		t.Errorf("message %q, want it to say the registry timed out", msg)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the failure took %s to show", d)
	}
	remove(t, rt, m.Metadata.Id)
	await(t, rt, m.Metadata.Id, "went away", gone)
}
