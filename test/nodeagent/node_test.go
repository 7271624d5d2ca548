package nodeagent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNewNodeLabels(t *testing.T) {
	cfg := &Config{NodeName: "n1", ProviderID: "anvil://ns/n1", Labels: map[string]string{"anvil.dev/pool": "blue"}}
	n := NewNode(cfg, Facts{Arch: "arm64", OS: "linux"})
	want := map[string]string{"anvil.dev/pool": "blue", "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "n1"}
	if len(n.Labels) != len(want) {
		t.Errorf("labels %v, want %v", n.Labels, want)
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Name != "n1" || n.Spec.ProviderID != "anvil://ns/n1" {
		t.Errorf("name %q providerID %q", n.Name, n.Spec.ProviderID)
	}
}

// A condition keeps its transition time while its status stays; a Node the lifecycle
// controller marked Unknown gets a new one.
func TestNodeStatusTransitionTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	observed := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(t0)},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
		}}}
	}
	for _, tc := range []struct {
		name     string
		observed *corev1.Node
		ready    time.Time // Ready's transition time
		disk     time.Time
	}{
		{"first post", nil, now, now},
		{"still ready", observed(corev1.ConditionTrue), t0, t0},
		{"marked unknown", observed(corev1.ConditionUnknown), now, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NodeStatus(Facts{Arch: "amd64", OS: "linux", CPUs: 2, MemoryBytes: 1 << 30}, tc.observed, now)
			n := &corev1.Node{Status: st}
			if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(tc.ready) || !c.LastHeartbeatTime.Time.Equal(now) {
				t.Errorf("Ready %+v, want True since %v, heartbeat %v", c, tc.ready, now)
			}
			if c := condition(n, corev1.NodeDiskPressure); c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(tc.disk) {
				t.Errorf("DiskPressure %+v, want False since %v", c, tc.disk)
			}
			for _, c := range st.Conditions {
				if c.Reason == "" {
					t.Errorf("condition %s has no reason", c.Type)
				}
			}
			if pods := st.Allocatable[corev1.ResourcePods]; !pods.IsZero() {
				t.Errorf("allocatable pods %v, want 0: no kubelet runs them", pods.String())
			}
		})
	}
}

func TestNeedsStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	posted := &corev1.Node{Status: NodeStatus(Facts{}, nil, now)}
	unknown := posted.DeepCopy()
	condition(unknown, corev1.NodeReady).Status = corev1.ConditionUnknown
	for _, tc := range []struct {
		name     string
		observed *corev1.Node
		last     time.Time
		want     bool
	}{
		{"as posted, recently", posted, now.Add(-10 * time.Second), false},
		{"as posted, interval passed", posted, now.Add(-time.Minute), true},
		{"marked unknown", unknown, now.Add(-10 * time.Second), true},
		{"no conditions", &corev1.Node{}, now, true},
	} {
		if got := NeedsStatus(tc.observed, tc.last, now, time.Minute); got != tc.want {
			t.Errorf("%s: NeedsStatus = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := func() Config {
		return Config{Server: "https://10.0.2.100:6443", CA: []byte("pem"), Token: "abcdef.0123456789abcdef",
			NodeName: "n1", ProviderID: "anvil://ns/n1", Labels: map[string]string{"anvil.dev/pool": "x"},
			LeaseInterval: time.Second, StatusInterval: time.Minute}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		err    string
	}{
		{"good", func(*Config) {}, ""},
		{"http server", func(c *Config) { c.Server = "http://10.0.2.100:6443" }, "--server"},
		{"no CA", func(c *Config) { c.CA = nil }, "--ca-file"},
		{"no token", func(c *Config) { c.Token = "" }, "--token"},
		{"bad token", func(c *Config) { c.Token = "ABCDEF.0123456789abcdef" }, "--token"},
		{"no node name", func(c *Config) { c.NodeName = "" }, "--node-name"},
		{"bad node name", func(c *Config) { c.NodeName = "n_1" }, "node name"},
		{"no provider ID", func(c *Config) { c.ProviderID = "" }, "--provider-id"},
		{"own label", func(c *Config) { c.Labels = map[string]string{"kubernetes.io/arch": "amd64"} }, "set by the agent"},
		{"bad label key", func(c *Config) { c.Labels = map[string]string{"a b": "x"} }, "key"},
		{"bad label value", func(c *Config) { c.Labels = map[string]string{"a": "x y"} }, "value"},
		{"zero interval", func(c *Config) { c.LeaseInterval = 0 }, "--lease-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.change(&c)
			err := c.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{"", map[string]string{}, ""},
		{"a=1,b.io/c=", map[string]string{"a": "1", "b.io/c": ""}, ""},
		{"a", nil, "not key=value"},
		{"=1", nil, "not key=value"},
		{"a=1,a=2", nil, "twice"},
	} {
		got, err := ParseLabels(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLabels(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("ParseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("ParseLabels(%q)[%s] = %q, want %q", tc.in, k, got[k], v)
			}
		}
	}
}
