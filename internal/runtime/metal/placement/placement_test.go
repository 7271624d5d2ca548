package placement

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestPolicy(t *testing.T) {
	rack1 := host("h", labelled("rack", "1"))
	for _, tc := range []struct {
		name     string
		p        *metalv1alpha1.HostPolicy
		ns       string
		nsLabels map[string]string
		want     bool
	}{
		{"by name", policy(nil, "a", "b"), "b", nil, true},
		{"another name", policy(nil, "a"), "b", nil, false},
		{"no namespaces at all", policy(nil), "a", nil, false},
		{"host selector matches", policy(map[string]string{"rack": "1"}, "a"), "a", nil, true},
		{"host selector does not match", policy(map[string]string{"rack": "2"}, "a"), "a", nil, false},
		{"namespace selector matches", policyBySelector(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}), "a", map[string]string{"team": "x"}, true},
		{"namespace selector does not match", policyBySelector(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}), "a", map[string]string{"team": "y"}, false},
		{"empty namespace selector allows all", policyBySelector(&metav1.LabelSelector{}), "a", nil, true},
		{"broken namespace selector allows none", policyBySelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}), "a", map[string]string{"team": "x"}, false},
	} {
		if got := Permitted(rack1, []*metalv1alpha1.HostPolicy{tc.p}, tc.ns, tc.nsLabels); got != tc.want {
			t.Errorf("%s: Permitted = %v, want %v", tc.name, got, tc.want)
		}
	}
	broken := policy(nil, "a")
	broken.Spec.HostSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Bogus"}}}
	if Offered(rack1, []*metalv1alpha1.HostPolicy{broken}) {
		t.Error("a policy whose hostSelector does not parse covers a Host")
	}
}

func TestCounts(t *testing.T) {
	pol := []*metalv1alpha1.HostPolicy{policy(nil, "tenant")}
	for _, tc := range []struct {
		name     string
		h        *metalv1alpha1.Host
		policies []*metalv1alpha1.HostPolicy
		want     bool
	}{
		{"free and offered", host("h"), pol, true},
		{"free, no policy", host("h"), nil, false},
		{"free, policy for other hosts", host("h"), []*metalv1alpha1.HostPolicy{policy(map[string]string{"rack": "9"}, "tenant")}, false},
		{"registering", host("h", inState(metalv1alpha1.StateRegistering)), pol, false},
		{"inspecting", host("h", inState(metalv1alpha1.StateInspecting)), pol, false},
		{"free in error", host("h", operational(metalv1alpha1.OperationalError)), pol, false},
		{"free, detached", host("h", detached), pol, false},
		{"free, deleting", host("h", deleting), pol, false},
		{"held, provisioned", host("h", heldBy("m"), inState(metalv1alpha1.StateProvisioned)), pol, true},
		{"held, in error", host("h", heldBy("m"), inState(metalv1alpha1.StateProvisioning), operational(metalv1alpha1.OperationalError)), pol, true},
		{"held, no policy any more", host("h", heldBy("m")), nil, true},
		{"held, deleting", host("h", heldBy("m"), deleting), pol, false},
	} {
		inv := Inventory{Hosts: []*metalv1alpha1.Host{tc.h}, Policies: tc.policies}
		if got := inv.Counts(tc.h); got != tc.want {
			t.Errorf("%s: Counts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCapacity(t *testing.T) {
	inv := Inventory{
		Hosts: []*metalv1alpha1.Host{
			host("a"),
			host("b", size(4, 2048), heldBy("m")),
			host("c", arch(computev1alpha1.ArchitectureARM64), noHardware),
			host("d", arch(computev1alpha1.ArchitectureARM64), operational(metalv1alpha1.OperationalError)),
			host("e", arch(computev1alpha1.ArchitectureRISCV64), inState(metalv1alpha1.StateInspecting)),
		},
		Hardware: map[string]*metalv1alpha1.HardwareDataSpec{
			"c": {CPU: metalv1alpha1.CPU{Count: 2}, MemoryMiB: 1024},
		},
		Policies: []*metalv1alpha1.HostPolicy{policy(nil, "tenant")},
	}
	got := inv.Capacity()
	want := Capacity{MilliCPU: 14000, MemoryBytes: (16<<10 + 2048 + 1024) << 20, Hosts: 3,
		Architectures: []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}}
	if got.MilliCPU != want.MilliCPU || got.MemoryBytes != want.MemoryBytes || got.Hosts != want.Hosts || !slices.Equal(got.Architectures, want.Architectures) {
		t.Fatalf("Capacity = %+v, want %+v", got, want)
	}
}

func class(name string, cpu, mem string, a computev1alpha1.Architecture, extra ...string) *computev1alpha1.MachineClass {
	c := &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Architecture: a,
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	for i := 0; i+1 < len(extra); i += 2 {
		c.Capabilities[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
	}
	return c
}

func TestSupportedClasses(t *testing.T) {
	inv := Inventory{
		Hosts: []*metalv1alpha1.Host{
			host("a"), // 8 cpu, 16 GiB amd64
			host("big", size(64, 512<<10), operational(metalv1alpha1.OperationalError)), // does not count
			host("arm", arch(computev1alpha1.ArchitectureARM64), size(4, 8<<10)),
		},
		Policies: []*metalv1alpha1.HostPolicy{policy(nil, "tenant")},
	}
	classes := []*computev1alpha1.MachineClass{
		class("whole", "8", "16Gi", "", ResourceHosts, "1"),
		class("too-big", "16", "16Gi", ""),
		class("only-on-big", "32", "256Gi", ""),
		class("arm-small", "2", "4Gi", computev1alpha1.ArchitectureARM64),
		class("arm-large", "8", "4Gi", computev1alpha1.ArchitectureARM64),
		class("gpu", "1", "1Gi", "", "nvidia.com/gpu", "1"),
		class("two-hosts", "1", "1Gi", "", ResourceHosts, "2"),
	}
	got := inv.SupportedClasses(classes)
	if want := []string{"arm-small", "whole"}; !slices.Equal(got, want) {
		t.Fatalf("SupportedClasses = %v, want %v", got, want)
	}
}

func TestCandidates(t *testing.T) {
	pol := []*metalv1alpha1.HostPolicy{policy(nil, "tenant")}
	for _, tc := range []struct {
		name     string
		hosts    []*metalv1alpha1.Host
		policies []*metalv1alpha1.HostPolicy
		req      func(*Request)
		want     []string
		reason   Reason
		says     string
		hardware map[string]*metalv1alpha1.HardwareDataSpec
	}{
		{name: "sorted by name", hosts: []*metalv1alpha1.Host{host("c"), host("a"), host("b")}, policies: pol,
			want: []string{"a", "b", "c"}},
		{name: "held, busy and unready hosts are skipped",
			hosts: []*metalv1alpha1.Host{host("a", heldBy("m")), host("b", inState(metalv1alpha1.StateDeprovisioning)),
				host("c", operational(metalv1alpha1.OperationalError)), host("d", detached), host("e")},
			policies: pol, want: []string{"e"}},
		{name: "no host of the architecture", hosts: []*metalv1alpha1.Host{host("a")}, policies: pol,
			req: func(r *Request) { r.Architecture = computev1alpha1.ArchitectureARM64 }, reason: ReasonWrongArchitecture, says: "no arm64 Host"},
		{name: "too big", hosts: []*metalv1alpha1.Host{host("a")}, policies: pol,
			req: func(r *Request) { r.MilliCPU = 9000 }, reason: ReasonNoFit, says: "no amd64 Host fits class small (needs 9 cpu and 4Gi memory)"},
		{name: "an extended resource no host has", hosts: []*metalv1alpha1.Host{host("a")}, policies: pol,
			req: func(r *Request) { r.Extended = map[string]int64{"nvidia.com/gpu": 1} }, reason: ReasonNoFit, says: "1 nvidia.com/gpu, which no Host offers"},
		{name: "one host resource is fine", hosts: []*metalv1alpha1.Host{host("a")}, policies: pol,
			req: func(r *Request) { r.Extended = map[string]int64{ResourceHosts: 1} }, want: []string{"a"}},
		{name: "host without hardware does not fit", hosts: []*metalv1alpha1.Host{host("a", noHardware)}, policies: pol,
			reason: ReasonNoFit},
		{name: "a kernel and initramfs go to Hosts with virtual media", policies: pol,
			hosts: []*metalv1alpha1.Host{host("a", bmc("ipmi://10.0.0.1")), host("b", bmc("redfish://10.0.0.2/redfish/v1/Systems/1")),
				host("c", bmc("fake://c")), host("d", bmc("redfish-virtualmedia+http://10.0.0.4/redfish/v1/Systems/1"))},
			req: func(r *Request) { r.Ramdisk = true }, want: []string{"b", "c", "d"}},
		{name: "a kernel and initramfs on IPMI Hosts only", hosts: []*metalv1alpha1.Host{host("a", bmc("ipmi://10.0.0.1"))}, policies: pol,
			req: func(r *Request) { r.Ramdisk = true }, reason: ReasonNoVirtualMedia,
			says: "no amd64 Host that fits class small can boot a kernel and initramfs: that needs a Redfish BMC with virtual media"},
		{name: "a disk image goes to IPMI Hosts too", hosts: []*metalv1alpha1.Host{host("a", bmc("ipmi://10.0.0.1"))}, policies: pol,
			want: []string{"a"}},
		{name: "host selector", hosts: []*metalv1alpha1.Host{host("a", labelled("rack", "1")), host("b", labelled("rack", "2"))}, policies: pol,
			req: func(r *Request) { r.HostSelector = labels.SelectorFromSet(map[string]string{"rack": "2"}) }, want: []string{"b"}},
		{name: "host selector expressions", policies: pol,
			hosts: []*metalv1alpha1.Host{host("a", labelled("tier", "reserved")), host("b", labelled("tier", "general")), host("c"), host("d", labelled("gpu", ""))},
			req:   func(r *Request) { r.HostSelector = selector(t, "tier notin (reserved),!gpu") }, want: []string{"b", "c"}},
		{name: "host selector expressions matching nothing", hosts: []*metalv1alpha1.Host{host("a", labelled("tier", "reserved"))}, policies: pol,
			req: func(r *Request) { r.HostSelector = selector(t, "tier notin (reserved)") }, reason: ReasonNoSelectorMatch},
		{name: "host selector matching nothing", hosts: []*metalv1alpha1.Host{host("a", labelled("rack", "1"))}, policies: pol,
			req: func(r *Request) { r.HostSelector = labels.SelectorFromSet(map[string]string{"rack": "2"}) }, reason: ReasonNoSelectorMatch,
			says: "no amd64 Host that fits class small matches hostSelector {rack=2}: change or remove spec.hostSelector"},
		{name: "namespace not allowed", hosts: []*metalv1alpha1.Host{host("a")}, policies: []*metalv1alpha1.HostPolicy{policy(nil, "other")},
			reason: ReasonNotPermitted, says: "no HostPolicy lets namespace tenant use a Host that fits class small: ask the pool's operators for one"},
		{name: "policy covers other hosts", hosts: []*metalv1alpha1.Host{host("a", labelled("rack", "1")), host("b", labelled("rack", "2"))},
			policies: []*metalv1alpha1.HostPolicy{policy(map[string]string{"rack": "2"}, "tenant"), policy(nil, "other")}, want: []string{"b"}},
		{name: "namespace allowed by label", hosts: []*metalv1alpha1.Host{host("a")},
			policies: []*metalv1alpha1.HostPolicy{policyBySelector(&metav1.LabelSelector{MatchLabels: map[string]string{"metal": "yes"}})},
			req:      func(r *Request) { r.NamespaceLabels = map[string]string{"metal": "yes"} }, want: []string{"a"}},
		{name: "hardware references go to Hosts that have the NIC and the disk", policies: pol,
			hosts: []*metalv1alpha1.Host{host("a"), host("b"), host("c"), host("d")}, hardware: map[string]*metalv1alpha1.HardwareDataSpec{
				"a": inventory("eth0", "sda"), "b": inventory("eno1", "sda"), "c": {NICs: []metalv1alpha1.NIC{{Name: "eth0", MACAddress: "52:54:00:00:00:0c"}},
					Disks: []metalv1alpha1.Disk{{Name: "sda"}}}}, // c's disk has no serial, d was never inspected
			req: macAndSerial, want: []string{"a"}},
		{name: "no Host has the NIC", policies: pol, hosts: []*metalv1alpha1.Host{host("b-server"), host("a-server")},
			hardware: map[string]*metalv1alpha1.HardwareDataSpec{"a-server": inventory("eno1", "sda"), "b-server": inventory("eno2", "sda")},
			req:      macAndSerial, reason: ReasonNoHardwareMatch,
			says: `no amd64 Host that fits class small has the hardware spec.hardwareMetaData reads: hardware key "mac": no NIC "eth0" with a MAC address (it has "eno1"): name a NIC or disk the servers have`},
		{name: "no hardware references: Hosts without HardwareData fit", policies: pol, hosts: []*metalv1alpha1.Host{host("a")}, want: []string{"a"}},
		{name: "all in use", hosts: []*metalv1alpha1.Host{host("a", heldBy("m1")), host("b", heldBy("m2")), host("c", size(1, 1024))}, policies: pol,
			reason: ReasonAllInUse, says: "every Host that fits class small and namespace tenant may use is in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := small()
			if tc.req != nil {
				tc.req(&req)
			}
			inv := Inventory{Hosts: tc.hosts, Policies: tc.policies, Hardware: tc.hardware}
			got, refusal := inv.Candidates(req)
			if tc.reason != "" {
				if refusal == nil {
					t.Fatalf("Candidates = %v, want refusal %s", names(got), tc.reason)
				}
				if refusal.Reason != tc.reason || !strings.Contains(refusal.Message, tc.says) {
					t.Fatalf("refusal %s %q, want %s saying %q", refusal.Reason, refusal.Message, tc.reason, tc.says)
				}
				if leak := tenantLeak(refusal.Message, tc.hosts); leak != "" {
					t.Fatalf("the tenant's refusal %q names %s", refusal.Message, leak)
				}
				return
			}
			if refusal != nil {
				t.Fatalf("refused: %s", refusal.Message)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Fatalf("Candidates = %v, want %v", names(got), tc.want)
			}
			for _, h := range got {
				if !inv.Matches(req, h) {
					t.Errorf("candidate %s does not Match the request", h.Name)
				}
			}
		})
	}
}

// macAndSerial asks for eth0's MAC and sda's serial.
func macAndSerial(r *Request) {
	r.HardwareMetaData = []*mriv1alpha1.HardwareMetaData{
		{Key: "mac", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_NIC_MAC_ADDRESS, Name: "eth0"},
		{Key: "disk", Field: mriv1alpha1.HardwareField_HARDWARE_FIELD_DISK_SERIAL_NUMBER, Name: "sda"}}
}

// inventory is a server's HardwareData with one NIC and one disk, each with its value.
func inventory(nic, disk string) *metalv1alpha1.HardwareDataSpec {
	return &metalv1alpha1.HardwareDataSpec{NICs: []metalv1alpha1.NIC{{Name: nic, MACAddress: "52:54:00:00:00:01"}},
		Disks: []metalv1alpha1.Disk{{Name: disk, SerialNumber: "S-" + disk}}}
}

// selector parses a label selector in kubectl's syntax.
func selector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// countOfHosts is a number of Hosts, which the tenant's refusals never give.
var countOfHosts = regexp.MustCompile(`\b\d+ (\w+ )?Hosts?\b`)

// tenantLeak says what of the infrastructure a tenant-facing message names: the Hosts'
// namespace, a Host's name (in quotes or as a word), or a count of Hosts.
func tenantLeak(msg string, hosts []*metalv1alpha1.Host) string {
	words := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ',' || r == ':' || r == '(' || r == ')' || r == '"' })
	for _, h := range hosts {
		if strings.Contains(msg, h.Namespace) {
			return "the infrastructure namespace " + h.Namespace
		}
		// The table's one-letter names ("a") are English words too.
		if len(h.Name) > 1 && slices.Contains(words, h.Name) {
			return "Host " + h.Name
		}
	}
	if c := countOfHosts.FindString(msg); c != "" {
		return "a count of Hosts (" + c + ")"
	}
	return ""
}
