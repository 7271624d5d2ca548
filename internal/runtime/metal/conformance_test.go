package metal

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri/conformance"
)

// TestConformance runs the MRI suite on a site of twelve amd64 Hosts, the runtime behind
// a real socket and restarted on the same namespace. The "arm-only" image has no entry
// for its machines; they are reimaged to "os-2".
func TestConformance(t *testing.T) {
	s := newSite(t, 12)
	served := conformance.Serve(t, "unix://"+filepath.Join(t.TempDir(), "mri.sock"), func() (conformance.Runtime, error) { return s.start() })
	start := time.Now()
	conformance.Run(t, conformance.Target{
		Start:          served.Start,
		Restart:        served.Restart,
		Spec:           func() *mriv1alpha1.MachineSpec { return s.spec("os") },
		MissingImage:   &mriv1alpha1.Image{Reference: s.images["os"].Reference, Digest: "sha256:" + strings.Repeat("0", 64)},
		WrongArchImage: &mriv1alpha1.Image{Reference: s.images["arm-only"].Reference, Digest: s.images["arm-only"].Digest},
		OtherImage:     &mriv1alpha1.Image{Reference: s.images["os-2"].Reference, Digest: s.images["os-2"].Digest},
		Timeout:        90 * time.Second,
		Labels:         map[string]string{LabelMachineNamespace: s.tenant},
		NoHotplug:      true,
	})
	t.Logf("conformance suite took %s", time.Since(start).Round(time.Millisecond))
}
