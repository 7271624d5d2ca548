package mutate

import (
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/mri"
)

func TestFixedAttachments(t *testing.T) {
	spec := specWith(vols(emptyDisk("data", 1<<20)), nic("eth0", "default"))
	for _, tc := range []struct {
		name string
		err  error
		fail bool
	}{
		{"the volume as it is", CheckAttachFixedVolume(spec, emptyDisk("data", 1<<20), "fixed"), false},
		{"the volume of another size", CheckAttachFixedVolume(spec, emptyDisk("data", 2<<20), "fixed"), true},
		{"another volume", CheckAttachFixedVolume(spec, emptyDisk("more", 1<<20), "fixed"), true},
		{"detach a volume never had", CheckDetachFixedVolume(spec, "more", "fixed"), false},
		{"detach the volume", CheckDetachFixedVolume(spec, "data", "fixed"), true},
		{"the NIC as it is", CheckAttachFixedNetworkInterface(spec, nic("eth0", "default"), "fixed"), false},
		{"the NIC on another network", CheckAttachFixedNetworkInterface(spec, nic("eth0", "other"), "fixed"), true},
		{"detach a NIC never had", CheckDetachFixedNetworkInterface(spec, "eth1", "fixed"), false},
		{"detach the NIC", CheckDetachFixedNetworkInterface(spec, "eth0", "fixed"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.fail {
				if tc.err != nil {
					t.Fatal(tc.err)
				}
				return
			}
			if mri.ReasonOf(tc.err) != invalid || !strings.HasSuffix(mri.MessageOf(tc.err), ": fixed") {
				t.Fatalf("got %v; want INVALID ending with the runtime's why", tc.err)
			}
		})
	}
}
