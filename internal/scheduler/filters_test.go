package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestFits(t *testing.T) {
	gpu := &Class{Name: "gpu", Index: 1, Architectures: AnyArch, Demand: Resources{
		MilliCPU: 1000, Memory: gi, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1}}}
	cases := []struct {
		name string
		pool *Pool
		req  func() *Request
		want Reason
	}{
		{"fits", newPool("p").build(), func() *Request { return request(smallClass()) }, Reason{}},
		{"not ready", newPool("p").notReady().build(), func() *Request { return request(smallClass()) },
			Reason{Code: ReasonNotReady}},
		{"heartbeat expired", newPool("p").expired().build(), func() *Request { return request(smallClass()) },
			Reason{Code: ReasonHeartbeatExpired}},
		{"refused recently", newPool("p").build(), func() *Request {
			r := request(smallClass())
			r.ExcludedUntil = map[string]time.Time{"p": testNow.Add(time.Second)}
			return r
		}, Reason{Code: ReasonRefusedRecently}},
		{"refusal expired", newPool("p").build(), func() *Request {
			r := request(smallClass())
			r.ExcludedUntil = map[string]time.Time{"p": testNow}
			return r
		}, Reason{}},
		{"wrong architecture", newPool("p").arch(computev1alpha1.ArchitectureARM64).build(), func() *Request {
			r := request(smallClass())
			r.Architectures = ArchSetOf(computev1alpha1.ArchitectureAMD64)
			return r
		}, Reason{Code: ReasonArchitecture}},
		{"emulated, emulation allowed", newPool("p").arch(computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64).native(computev1alpha1.ArchitectureAMD64).build(),
			func() *Request {
				r := request(smallClass())
				r.Architectures = ArchSetOf(computev1alpha1.ArchitectureARM64)
				return r
			}, Reason{}},
		{"emulated, emulation forbidden", newPool("p").arch(computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64).native(computev1alpha1.ArchitectureAMD64).build(),
			func() *Request {
				r := request(smallClass())
				r.Architectures, r.NativeOnly = ArchSetOf(computev1alpha1.ArchitectureARM64), true
				return r
			}, Reason{Code: ReasonEmulated}},
		{"native, emulation forbidden", newPool("p").arch(computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64).native(computev1alpha1.ArchitectureARM64).build(),
			func() *Request {
				r := request(smallClass())
				r.Architectures, r.NativeOnly = ArchSetOf(computev1alpha1.ArchitectureARM64), true
				return r
			}, Reason{}},
		{"class unsupported", newPool("p").classes(3).build(), func() *Request { return request(smallClass()) },
			Reason{Code: ReasonClassUnsupported}},
		{"selector mismatch", newPool("p").labels("zone", "a").build(), func() *Request {
			r := request(smallClass())
			r.PoolSelector = map[string]string{"zone": "b"}
			return r
		}, Reason{Code: ReasonPoolSelector}},
		{"selector match", newPool("p").labels("zone", "a", "rack", "1").build(), func() *Request {
			r := request(smallClass())
			r.PoolSelector = map[string]string{"zone": "a"}
			return r
		}, Reason{}},
		{"tenant not allowed", newPool("p").tenants(&Tenants{Namespaces: map[string]struct{}{"team-b": {}}}).build(),
			func() *Request { return request(smallClass()) }, Reason{Code: ReasonTenancy}},
		{"tenant allowed by label", newPool("p").tenants(&Tenants{
			Selector: labels.SelectorFromSet(labels.Set{"tier": "gold"})}).build(),
			func() *Request {
				r := request(smallClass())
				r.NamespaceLabels = labels.Set{"tier": "gold"}
				return r
			}, Reason{}},
		{"untolerated taint", newPool("p").taint("dedicated", "db", corev1.TaintEffectNoSchedule).build(),
			func() *Request { return request(smallClass()) }, Reason{Code: ReasonTaint}},
		// The text of a taint refusal names the taint.
		{"tolerated taint", newPool("p").taint("dedicated", "db", corev1.TaintEffectNoSchedule).build(),
			func() *Request {
				r := request(smallClass())
				r.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "db"}}
				return r
			}, Reason{}},
		{"toleration with other value", newPool("p").taint("dedicated", "db", corev1.TaintEffectNoSchedule).build(),
			func() *Request {
				r := request(smallClass())
				r.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "web"}}
				return r
			}, Reason{Code: ReasonTaint}},
		{"exists toleration", newPool("p").taint("maintenance", "", corev1.TaintEffectNoExecute).build(),
			func() *Request {
				r := request(smallClass())
				r.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				return r
			}, Reason{}},
		{"prefer-no-schedule does not filter", newPool("p").taint("soft", "x", corev1.TaintEffectPreferNoSchedule).build(),
			func() *Request { return request(smallClass()) }, Reason{}},
		{"insufficient memory", newPool("p").alloc(8000, gi).build(), func() *Request { return request(smallClass()) },
			Reason{Code: ReasonInsufficient, Resource: "memory"}},
		{"insufficient cpu", newPool("p").alloc(500, 16*gi).build(), func() *Request { return request(smallClass()) },
			Reason{Code: ReasonInsufficient, Resource: "cpu"}},
		{"no gpu", newPool("p").classes(1).build(), func() *Request { return request(gpu) },
			Reason{Code: ReasonInsufficient, Resource: "nvidia.com/gpu"}},
		{"gpu", newPool("p").classes(1).ext("nvidia.com/gpu", 2).build(), func() *Request { return request(gpu) }, Reason{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Fits(tc.pool, tc.req(), testNow)
			if got.Code != tc.want.Code || got.Resource != tc.want.Resource {
				t.Fatalf("Fits = %+v (%s), want %+v (%s)", got, got, tc.want, tc.want)
			}
		})
	}
}

func TestFitsCountsUsedResources(t *testing.T) {
	p := newPool("p").alloc(2000, 4*gi).build()
	p.used = Resources{MilliCPU: 1500, Memory: gi}
	if got := Fits(p, request(smallClass()), testNow); got.Code != ReasonInsufficient || got.Resource != "cpu" {
		t.Fatalf("Fits = %s, want insufficient cpu once 1.5 of 2 cpu are used", got)
	}
}

// Admits is tenancy and taints alone: a full, not ready pool still admits what its owners
// allow, and refuses what they do not.
func TestAdmits(t *testing.T) {
	gold := TenantsFrom(&computev1alpha1.TenantPolicy{Namespaces: []string{"a"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}})
	for _, tc := range []struct {
		name   string
		pool   *Pool
		ns     string
		labels labels.Set
		tols   []corev1.Toleration
		want   ReasonCode
	}{
		{"full and not ready, every tenant", newPool("p").alloc(0, 0).notReady().build(), "x", nil, nil, ReasonNone},
		{"named namespace", newPool("p").tenants(gold).build(), "a", nil, nil, ReasonNone},
		{"selected namespace", newPool("p").tenants(gold).build(), "b", labels.Set{"tier": "gold"}, nil, ReasonNone},
		{"other namespace", newPool("p").tenants(gold).build(), "b", labels.Set{"tier": "silver"}, nil, ReasonTenancy},
		{"untolerated taint", newPool("p").taint("k", "v", corev1.TaintEffectNoSchedule).build(), "x", nil, nil, ReasonTaint},
		{"tolerated taint", newPool("p").taint("k", "v", corev1.TaintEffectNoSchedule).build(), "x", nil,
			[]corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}, ReasonNone},
		{"a preference is no refusal", newPool("p").taint("k", "v", corev1.TaintEffectPreferNoSchedule).build(), "x", nil, nil, ReasonNone},
	} {
		r := &Request{Namespace: tc.ns, NamespaceLabels: tc.labels, Tolerations: tc.tols}
		if got := Admits(tc.pool, r); got.Code != tc.want {
			t.Errorf("%s: %v, want code %v", tc.name, got, tc.want)
		}
	}
	if TenantsFrom(nil) != nil || TenantsFrom(&computev1alpha1.TenantPolicy{}) != nil {
		t.Error("an empty tenant policy must allow every namespace (nil)")
	}
	bad := TenantsFrom(&computev1alpha1.TenantPolicy{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}})
	if bad.Allows("x", labels.Set{"k": "v"}) {
		t.Error("an invalid selector allowed a namespace")
	}
}
