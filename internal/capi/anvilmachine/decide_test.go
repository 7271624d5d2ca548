package anvilmachine

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

const (
	ns      = "tenant"
	name    = "md-0-abcde"
	cluster = "c1"
)

func anvilMachine(mut ...func(*infrav1.AnvilMachine)) *infrav1.AnvilMachine {
	am := &infrav1.AnvilMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: infrav1.AnvilMachineSpec{
			MachineClassRef:     computev1alpha1.MachineClassReference{Name: "small"},
			Image:               "registry.example/os:1",
			Architecture:        computev1alpha1.ArchitectureARM64,
			MachinePoolSelector: map[string]string{"kind": "vm"},
			Volumes:             []computev1alpha1.MachineVolume{{Name: "root", Image: &computev1alpha1.ImageDiskSource{}}},
		},
	}
	for _, f := range mut {
		f(am)
	}
	return am
}

func capiMachine(mut ...func(*clusterv1.Machine)) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: new(name + "-bootstrap")}},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func bootstrapSecret(data map[string]string) *corev1.Secret {
	// As kubeadm's bootstrap provider writes it: labelled for the cluster, owned by its config.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-bootstrap", Namespace: ns,
		Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "bootstrap.cluster.x-k8s.io/v1beta2", Kind: "KubeadmConfig", Name: name, UID: "kc"}}},
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func anvil(mut ...func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{infrav1.AnvilMachineLabel: name, clusterv1.ClusterNameLabel: cluster}},
		Spec:       computev1alpha1.MachineSpec{Image: "registry.example/os:1"},
		Status:     computev1alpha1.MachineStatus{State: computev1alpha1.MachineStatePending},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func input(mut ...func(*Input)) Input {
	in := Input{
		AnvilMachine:                     anvilMachine(),
		Machine:                          capiMachine(),
		ClusterInfrastructureProvisioned: true,
		FailureDomainLabel:               infrav1.DefaultFailureDomainLabel,
		Namespace:                        ns,
		Bootstrap:                        bootstrapSecret(map[string]string{"value": "#cloud-config\n", "format": "cloud-config"}),
	}
	for _, f := range mut {
		f(&in)
	}
	return in
}

func running(m *computev1alpha1.Machine) {
	m.Status.State = computev1alpha1.MachineStateRunning
	m.Status.Addresses = []computev1alpha1.MachineAddress{
		{Type: "InternalIP", Address: "10.0.2.15"}, {Type: "Console", Address: "/var/log/x"}, {Type: "Hostname", Address: name},
	}
}

// TestDecideWaitsInContractOrder: each missing prerequisite gives its own reason, checked in the
// contract's order, and nothing is made meanwhile.
func TestDecideWaitsInContractOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Input
		reason  string
		message string
	}{
		{"no owner Machine", input(func(in *Input) { in.Machine = nil }), infrav1.ReasonWaitingForOwner, "owner Machine"},
		{"cluster infrastructure not provisioned", input(func(in *Input) { in.ClusterInfrastructureProvisioned = false }),
			infrav1.ReasonWaitingForClusterInfrastructure, "infrastructure of Cluster c1"},
		{"a providerID naming another namespace", input(func(in *Input) { in.AnvilMachine.Spec.ProviderID = "anvil://victim/md-0-abcde" }),
			infrav1.ReasonForeignProviderID, "names a Machine in namespace victim"},
		{"no bootstrap data yet", input(func(in *Input) { in.Machine.Spec.Bootstrap.DataSecretName = nil }),
			infrav1.ReasonWaitingForBootstrapData, "bootstrap data Secret"},
		{"bootstrap Secret missing", input(func(in *Input) { in.Bootstrap = nil }),
			infrav1.ReasonBootstrapDataNotFound, "bootstrap data Secret tenant/md-0-abcde-bootstrap not found"},
		{"bootstrap Secret without value", input(func(in *Input) { in.Bootstrap = bootstrapSecret(map[string]string{"format": "cloud-config"}) }),
			infrav1.ReasonBootstrapDataInvalid, `has no "value" key`},
		{"bootstrap Secret of no bootstrap provider", input(func(in *Input) { in.Bootstrap.OwnerReferences = nil }),
			infrav1.ReasonBootstrapDataNotOwned, "no owner reference to a bootstrap provider's config"},
		{"hand-made bootstrap Secret labelled for the cluster", input(func(in *Input) {
			in.Bootstrap.OwnerReferences = nil
			in.Bootstrap.Labels[infrav1.LabelBootstrapData] = "other"
		}), infrav1.ReasonBootstrapDataNotOwned, "no label infrastructure.cluster.x-k8s.io/anvil-bootstrap-data=c1"},
		{"bootstrap Secret of another cluster (or the kubeconfig's)", input(func(in *Input) {
			in.Bootstrap.Labels[clusterv1.ClusterNameLabel] = "other"
			in.Bootstrap.OwnerReferences[0] = metav1.OwnerReference{APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlane", Name: "cp"}
		}), infrav1.ReasonBootstrapDataNotOwned, "is not labelled cluster.x-k8s.io/cluster-name=c1"},
		{"first-boot Secret name taken", input(func(in *Input) {
			in.FirstBootSecret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}), infrav1.ReasonSecretNameTaken, "was not made for this AnvilMachine"},
		{"first-boot Secret labelled but owned by nobody here", input(func(in *Input) {
			in.Local = true
			in.FirstBootSecret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{infrav1.AnvilMachineLabel: name, clusterv1.ClusterNameLabel: cluster}}}
		}), infrav1.ReasonSecretNameTaken, "was not made for this AnvilMachine"},
		{"bootstrap format anvil cannot boot", input(func(in *Input) { in.Bootstrap = bootstrapSecret(map[string]string{"value": "x", "format": "butane"}) }),
			infrav1.ReasonBootstrapDataInvalid, `format "butane": anvil boots "cloud-config" or "ignition"`},
		{"failure domain against the template's selector", input(func(in *Input) {
			in.AnvilMachine.Spec.MachinePoolSelector[infrav1.DefaultFailureDomainLabel] = "zone-b"
			in.Machine.Spec.FailureDomain = "zone-a"
		}), infrav1.ReasonFailureDomainConflict, "drop topology.kubernetes.io/zone from the AnvilMachineTemplate's machinePoolSelector"},
		{"someone else's Machine of that name", input(func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) { m.Labels = nil })
		}), infrav1.ReasonMachineNameTaken, "anvil Machine tenant/md-0-abcde exists and was not made for this AnvilMachine"},
		{"another cluster's Machine of that name", input(func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) { m.Labels[clusterv1.ClusterNameLabel] = "c2" })
		}), infrav1.ReasonMachineNameTaken, "not made for this AnvilMachine"},
		{"anvil Machine gone after it was made", input(func(in *Input) { in.AnvilMachine.Spec.ProviderID = ProviderID(ns, name) }),
			infrav1.ReasonMachineGone, "is gone and is not made again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Create != nil || p.Secret != nil || p.ProviderID != "" || p.Image != "" || p.BlockMove {
				t.Errorf("plan acts while waiting: %+v", p)
			}
			if p.Ready.Type != infrav1.ConditionReady || p.Ready.Status != metav1.ConditionFalse || p.Ready.Reason != tc.reason {
				t.Errorf("Ready = %s %s, want False %s", p.Ready.Status, p.Ready.Reason, tc.reason)
			}
			if !strings.Contains(p.Ready.Message, tc.message) {
				t.Errorf("message %q does not say %q", p.Ready.Message, tc.message)
			}
		})
	}
}

func TestDecideCreatesOneMachineFromTheTemplate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          Input
		ignition    bool
		wantSel     map[string]string
		wantNS      string
		wantSecretK string
	}{
		{"cloud-config", input(), false, map[string]string{"kind": "vm"}, ns, "userData"},
		{"no format means cloud-config", input(func(in *Input) { in.Bootstrap = bootstrapSecret(map[string]string{"value": "x"}) }),
			false, map[string]string{"kind": "vm"}, ns, "userData"},
		{"ignition", input(func(in *Input) {
			in.Bootstrap = bootstrapSecret(map[string]string{"value": "{}", "format": "ignition"})
		}),
			true, map[string]string{"kind": "vm"}, ns, "ignition"},
		{"failure domain becomes a pool selector", input(func(in *Input) { in.Machine.Spec.FailureDomain = "zone-a" }),
			false, map[string]string{"kind": "vm", infrav1.DefaultFailureDomainLabel: "zone-a"}, ns, "userData"},
		{"failure domain through the cluster's label", input(func(in *Input) {
			in.Machine.Spec.FailureDomain = "rack-3"
			in.FailureDomainLabel = "example.com/rack"
			in.AnvilMachine.Spec.MachinePoolSelector = nil
		}), false, map[string]string{"example.com/rack": "rack-3"}, ns, "userData"},
		{"remote namespace", input(func(in *Input) { in.Namespace = "site-a-tenant" }), false, map[string]string{"kind": "vm"}, "site-a-tenant", "userData"},
		{"what the image must say", input(func(in *Input) {
			in.AnvilMachine.Spec.RequiredImageAnnotations = map[string]string{computev1alpha1.ImageAnnotationKubernetesVersion: "v1.36.3"}
		}), false, map[string]string{"kind": "vm"}, ns, "userData"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			m := p.Create
			if m == nil {
				t.Fatalf("no Machine to create: %+v", p.Ready)
			}
			if m.Name != name || m.Namespace != tc.wantNS {
				t.Errorf("Machine %s/%s, want %s/%s", m.Namespace, m.Name, tc.wantNS, name)
			}
			if m.Labels[infrav1.AnvilMachineLabel] != name || m.Labels[clusterv1.ClusterNameLabel] != cluster || len(m.OwnerReferences) != 0 {
				t.Errorf("labels %v, owners %v: want the AnvilMachine and cluster labels and no owner", m.Labels, m.OwnerReferences)
			}
			s := m.Spec
			if s.MachineClassRef.Name != "small" || s.Image != "registry.example/os:1" || s.Architecture != computev1alpha1.ArchitectureARM64 ||
				len(s.Volumes) != 1 || s.Power != computev1alpha1.PowerOn || s.ImageUpdatePolicy != computev1alpha1.ImageUpdatePolicyReimage || s.MachinePoolRef != nil {
				t.Errorf("spec not the template's: %+v", s)
			}
			if !maps.Equal(s.RequiredImageAnnotations, tc.in.AnvilMachine.Spec.RequiredImageAnnotations) {
				t.Errorf("requiredImageAnnotations %v, want the template's %v", s.RequiredImageAnnotations, tc.in.AnvilMachine.Spec.RequiredImageAnnotations)
			}
			if len(s.MachinePoolSelector) != len(tc.wantSel) {
				t.Errorf("selector %v, want %v", s.MachinePoolSelector, tc.wantSel)
			}
			for k, v := range tc.wantSel {
				if s.MachinePoolSelector[k] != v {
					t.Errorf("selector %v, want %v", s.MachinePoolSelector, tc.wantSel)
				}
			}
			ref := s.UserDataRef
			if tc.ignition {
				ref = s.IgnitionRef
			}
			if ref == nil || ref.Name != name || ref.Key != "" || (s.UserDataRef != nil && s.IgnitionRef != nil) {
				t.Errorf("first-boot refs userData %v ignition %v", s.UserDataRef, s.IgnitionRef)
			}
			sec := p.Secret
			if sec == nil || sec.Name != name || sec.Namespace != tc.wantNS || len(sec.Data) != 1 || string(sec.Data[tc.wantSecretK]) != string(tc.in.Bootstrap.Data["value"]) {
				t.Errorf("first-boot Secret %+v, want %s/%s with %s", sec, tc.wantNS, name, tc.wantSecretK)
			}
			if !p.BlockMove || p.ProviderID != "" || p.Ready.Reason != infrav1.ReasonProvisioning {
				t.Errorf("blockMove %v providerID %q ready %s: want the move blocked, no providerID before the Machine is seen, Provisioning", p.BlockMove, p.ProviderID, p.Ready.Reason)
			}
			if tc.in.AnvilMachine.Spec.MachinePoolSelector != nil && len(tc.in.AnvilMachine.Spec.MachinePoolSelector) != 1 {
				t.Errorf("the AnvilMachine's own selector was changed: %v", tc.in.AnvilMachine.Spec.MachinePoolSelector)
			}
		})
	}
}

// The data template's hostname and metadata become the new Machine's, and every Machine
// gets provider-id (the providerID its guest's node agent registers), even without a
// template and even over a provider-id the input carries.
func TestDecideGivesTheMachineItsMetaData(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       Input
		hostname string
		want     map[string]string
	}{
		{"no data template", input(), "", map[string]string{"provider-id": "anvil://tenant/md-0-abcde"}},
		{"data template", input(func(in *Input) {
			in.Hostname, in.MetaData = "c1-w3", map[string]string{"anvil-index": "3", "role": "worker"}
			in.HardwareMetaData = []computev1alpha1.HardwareMetaData{{Key: "mac", Field: computev1alpha1.HardwareNICMACAddress, Name: "eth0"}}
		}), "c1-w3", map[string]string{"anvil-index": "3", "role": "worker", "provider-id": "anvil://tenant/md-0-abcde"}},
		{"provider-id is the provider's", input(func(in *Input) { in.MetaData = map[string]string{"provider-id": "anvil://other/x"} }),
			"", map[string]string{"provider-id": "anvil://tenant/md-0-abcde"}},
		{"remote namespace", input(func(in *Input) { in.Namespace = "site-a-tenant" }),
			"", map[string]string{"provider-id": "anvil://site-a-tenant/md-0-abcde"}},
		{"control-plane load balancer: the node-local proxy's, over the template's", input(func(in *Input) {
			in.MetaData = map[string]string{"control-plane-forward": "192.0.2.1:1"}
			in.LoadBalancer = &LoadBalancer{Endpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 16443},
				SegmentEndpoint: clusterv1.APIEndpoint{Host: "10.200.0.1", Port: 16443}}
		}), "", map[string]string{"provider-id": "anvil://tenant/md-0-abcde",
			"control-plane-endpoint": "127.0.0.1:16443", "control-plane-forward": "10.200.0.1:16443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.in.MetaData)
			m := Decide(tc.in).Create
			if m == nil {
				t.Fatal("no Machine to create")
			}
			if m.Spec.Hostname != tc.hostname || !maps.Equal(m.Spec.MetaData, tc.want) {
				t.Errorf("hostname %q metaData %v, want %q %v", m.Spec.Hostname, m.Spec.MetaData, tc.hostname, tc.want)
			}
			if !maps.Equal(tc.in.MetaData, before) {
				t.Errorf("Decide changed its input's metadata to %v", tc.in.MetaData)
			}
			// The hardware references go to the anvil Machine as they are: its runtime resolves them.
			if !slices.Equal(m.Spec.HardwareMetaData, tc.in.HardwareMetaData) {
				t.Errorf("hardwareMetaData %v, want the template's %v", m.Spec.HardwareMetaData, tc.in.HardwareMetaData)
			}
		})
	}
}

func TestDecideReportsTheMachine(t *testing.T) {
	provisioned := func(in *Input) { in.AnvilMachine.Status.Initialization.Provisioned = new(true) }
	withID := func(in *Input) { in.AnvilMachine.Spec.ProviderID = ProviderID(ns, name) }
	for _, tc := range []struct {
		name        string
		in          Input
		provisioned bool
		blockMove   bool
		reason      string
		message     string
	}{
		{"pending and unschedulable: says why in the anvil Machine's words", input(func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) {
				m.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
					Reason: computev1alpha1.ReasonUnschedulable, Message: "no pool offers architecture arm64"}}
			})
		}), false, true, infrav1.ReasonProvisioning, "is not scheduled: Unschedulable: no pool offers architecture arm64"},
		{"its image lacks what the template requires: says so with its own reason", input(func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) {
				m.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionScheduled, Status: metav1.ConditionFalse,
					Reason: computev1alpha1.ReasonImageRequirementsUnmet, Message: "image r/os:1 lacks dev.anvil.kubernetes.version=v1.36.3"}}
			})
		}), false, true, infrav1.ReasonImageRequirementsUnmet, "is not scheduled: ImageRequirementsUnmet: image r/os:1 lacks dev.anvil.kubernetes.version=v1.36.3"},
		{"pending, bound, Ready False with a message", input(func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) {
				m.Status.Conditions = []metav1.Condition{{Type: computev1alpha1.ConditionReady, Status: metav1.ConditionFalse,
					Reason: computev1alpha1.ReasonSecretNotFound, Message: "Secret tenant/x not found"}}
			})
		}), false, true, infrav1.ReasonProvisioning, "SecretNotFound: Secret tenant/x not found"},
		{"pending with no conditions", input(func(in *Input) { in.Existing = anvil(func(m *computev1alpha1.Machine) { m.Status.State = "" }) }),
			false, true, infrav1.ReasonProvisioning, "anvil Machine tenant/md-0-abcde is Pending"},
		{"running", input(func(in *Input) { in.Existing = anvil(running) }), true, false, infrav1.ReasonRunning, ""},
		{"shut down after running stays provisioned", input(provisioned, withID, func(in *Input) {
			in.Existing = anvil(func(m *computev1alpha1.Machine) { m.Status.State = computev1alpha1.MachineStateShutdown })
		}), true, false, infrav1.ReasonNotRunning, "is Shutdown"},
		{"deleted from outside after running", input(provisioned, withID, func(in *Input) {
			in.Existing = anvil(running, func(m *computev1alpha1.Machine) { m.DeletionTimestamp = &metav1.Time{} })
		}), true, false, infrav1.ReasonNotRunning, "is being deleted"},
		{"cluster infrastructure regressed: the made Machine is still reported", input(func(in *Input) {
			in.ClusterInfrastructureProvisioned = false
			in.Existing = anvil(running)
		}), true, false, infrav1.ReasonRunning, ""},
		{"bootstrap Secret gone later: the Machine is still reported", input(func(in *Input) {
			in.Bootstrap = nil
			in.Existing = anvil(running)
		}), true, false, infrav1.ReasonRunning, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Create != nil {
				t.Fatalf("creates another Machine: %+v", p.Create)
			}
			if p.Provisioned != tc.provisioned || p.BlockMove != tc.blockMove {
				t.Errorf("provisioned %v blockMove %v, want %v %v", p.Provisioned, p.BlockMove, tc.provisioned, tc.blockMove)
			}
			wantStatus := metav1.ConditionFalse
			if tc.reason == infrav1.ReasonRunning {
				wantStatus = metav1.ConditionTrue
			}
			if p.Ready.Status != wantStatus || p.Ready.Reason != tc.reason || !strings.Contains(p.Ready.Message, tc.message) {
				t.Errorf("Ready %s %s %q, want %s %s saying %q", p.Ready.Status, p.Ready.Reason, p.Ready.Message, wantStatus, tc.reason, tc.message)
			}
			if tc.in.AnvilMachine.Spec.ProviderID == "" && p.ProviderID != ProviderID(ns, name) {
				t.Errorf("providerID %q, want it written once the Machine is seen", p.ProviderID)
			}
			if tc.in.AnvilMachine.Spec.ProviderID != "" && p.ProviderID != "" {
				t.Errorf("providerID rewritten: %q", p.ProviderID)
			}
			if (tc.in.Bootstrap == nil) != (p.Secret == nil) {
				t.Errorf("first-boot Secret %v with bootstrap data %v", p.Secret, tc.in.Bootstrap)
			}
		})
	}
}

func TestDecideStatusAddressesAndFailureDomain(t *testing.T) {
	p := Decide(input(func(in *Input) {
		in.Existing = anvil(running)
		in.PoolLabels = map[string]string{infrav1.DefaultFailureDomainLabel: "zone-a", "kind": "vm"}
	}))
	want := []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: "10.0.2.15"}, {Type: clusterv1.MachineHostName, Address: name}}
	if len(p.Addresses) != len(want) || p.Addresses[0] != want[0] || p.Addresses[1] != want[1] {
		t.Errorf("addresses %v, want %v (types Cluster API refuses left out)", p.Addresses, want)
	}
	if p.FailureDomain != "zone-a" {
		t.Errorf("failure domain %q, want the pool's zone-a", p.FailureDomain)
	}
	if p := Decide(input(func(in *Input) { in.Existing = anvil(running) })); p.FailureDomain != "" {
		t.Errorf("failure domain %q with the pool unknown", p.FailureDomain)
	}
}

// An in-place update writes a new image into the AnvilMachine; the anvil Machine is given it
// (and reimages), never replaced.
func TestDecideCarriesANewImageToTheMachine(t *testing.T) {
	p := Decide(input(func(in *Input) {
		in.AnvilMachine.Spec.Image = "registry.example/os:2"
		in.AnvilMachine.Spec.ProviderID = ProviderID(ns, name)
		in.AnvilMachine.Status.Initialization.Provisioned = new(true)
		in.Existing = anvil(running)
	}))
	if p.Image != "registry.example/os:2" || p.Create != nil {
		t.Errorf("image %q create %v, want the new image on the existing Machine", p.Image, p.Create)
	}
	if p := Decide(input(func(in *Input) { in.Existing = anvil(running) })); p.Image != "" {
		t.Errorf("image %q set although unchanged", p.Image)
	}
}

func TestDecideDelete(t *testing.T) {
	forMove := anvilMachine(func(am *infrav1.AnvilMachine) {
		am.Annotations = map[string]string{infrav1.AnnotationDeleteForMove: ""}
	})
	for _, tc := range []struct {
		name     string
		am       *infrav1.AnvilMachine
		existing *computev1alpha1.Machine
		want     DeletePlan
		message  string
	}{
		{"deletes its Machine", anvilMachine(), anvil(running), DeletePlan{DeleteMachine: true}, "deleting anvil Machine tenant/md-0-abcde"},
		{"waits for it to go", anvilMachine(), anvil(func(m *computev1alpha1.Machine) { m.DeletionTimestamp = &metav1.Time{} }),
			DeletePlan{}, "its pool frees the server or VM"},
		{"goes once the Machine is gone", anvilMachine(), nil, DeletePlan{RemoveFinalizer: true}, ""},
		{"never deletes a Machine it did not make", anvilMachine(), anvil(func(m *computev1alpha1.Machine) { m.Labels = nil }),
			DeletePlan{RemoveFinalizer: true}, ""},
		{"clusterctl move keeps the Machine", forMove, anvil(running), DeletePlan{RemoveFinalizer: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideDelete(tc.am, tc.existing)
			if got.DeleteMachine != tc.want.DeleteMachine || got.RemoveFinalizer != tc.want.RemoveFinalizer {
				t.Errorf("delete %v removeFinalizer %v, want %v %v", got.DeleteMachine, got.RemoveFinalizer, tc.want.DeleteMachine, tc.want.RemoveFinalizer)
			}
			if tc.message != "" && (got.Ready.Reason != infrav1.ReasonDeleting || !strings.Contains(got.Ready.Message, tc.message)) {
				t.Errorf("Ready %s %q, want Deleting saying %q", got.Ready.Reason, got.Ready.Message, tc.message)
			}
		})
	}
}

func TestProviderID(t *testing.T) {
	if got := ProviderID("tenant", "m-1"); got != "anvil://tenant/m-1" {
		t.Fatalf("ProviderID = %q", got)
	}
	for _, tc := range []struct{ id, ns, name string }{
		{"anvil://tenant/m-1", "tenant", "m-1"},
		{"anvil://t/a.b", "t", "a.b"},
		{"aws:///us-east-1/i-1", "", ""},
		{"anvil://tenant", "", ""},
		{"anvil://Tenant/m", "", ""},
		{"anvil://tenant/", "", ""},
		{"anvil://tenant/a/b", "", ""},
		{"", "", ""},
	} {
		gotNS, gotName, err := ParseProviderID(tc.id)
		if (err == nil) != (tc.ns != "") || gotNS != tc.ns || gotName != tc.name {
			t.Errorf("ParseProviderID(%q) = %q, %q, %v", tc.id, gotNS, gotName, err)
		}
	}
	am := anvilMachine()
	if n, m, _ := MachineKey(am, "remote"); n != "remote" || m != name {
		t.Errorf("MachineKey before a providerID = %s/%s", n, m)
	}
	am.Spec.ProviderID = "anvil://remote/x"
	if n, m, err := MachineKey(am, "remote"); n != "remote" || m != "x" || err != nil {
		t.Errorf("MachineKey = %s/%s, %v, want the providerID's", n, m, err)
	}
	// A tenant's providerID naming another namespace reaches nothing there.
	am.Spec.ProviderID = "anvil://elsewhere/x"
	if n, m, err := MachineKey(am, "remote"); err == nil || !strings.Contains(err.Error(), "namespace elsewhere") {
		t.Errorf("MachineKey of a foreign providerID = %s/%s, %v; want a refusal", n, m, err)
	}
}

// kubeadm's bootstrap provider names its Secret like the Machine (and so like the
// AnvilMachine and its anvil Machine): the anvil Machine boots that Secret's value in place,
// and the provider writes no Secret over it, before or after the anvil Machine is made. A
// Secret of that name that is not the bootstrap data is still refused, and an anvil Machine
// in another control plane still gets its copy.
func TestDecideBootsABootstrapSecretOfItsOwnNameInPlace(t *testing.T) {
	atName := func(format, value string) func(*Input) {
		return func(in *Input) {
			s := bootstrapSecret(map[string]string{"value": value, "format": format})
			s.Name = name
			in.Machine.Spec.Bootstrap.DataSecretName = new(name)
			in.Bootstrap, in.FirstBootSecret, in.Local = s, s, true
		}
	}
	for _, tc := range []struct {
		name       string
		in         Input
		wantRef    *computev1alpha1.SecretKeySelector
		ignition   bool
		wantSecret string // the key of the Secret the plan writes; "" for none
		reason     string
	}{
		{"cloud-config at the Machine's name", input(atName("cloud-config", "## template: jinja\n#cloud-config\n")),
			&computev1alpha1.SecretKeySelector{Name: name, Key: "value"}, false, "", infrav1.ReasonProvisioning},
		{"ignition at the Machine's name", input(atName("ignition", "{}")),
			&computev1alpha1.SecretKeySelector{Name: name, Key: "value"}, true, "", infrav1.ReasonProvisioning},
		{"another control plane: a copy there", input(atName("cloud-config", "#cloud-config\n"), func(in *Input) {
			in.Local, in.Namespace, in.FirstBootSecret = false, "site-a-tenant", nil
		}), &computev1alpha1.SecretKeySelector{Name: name}, false, "userData", infrav1.ReasonProvisioning},
		{"a hand-made Secret at the name is not the bootstrap data", input(func(in *Input) {
			in.Local = true
			in.FirstBootSecret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}), nil, false, "", infrav1.ReasonSecretNameTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.Ready.Reason != tc.reason {
				t.Fatalf("Ready %s %s %q, want reason %s", p.Ready.Status, p.Ready.Reason, p.Ready.Message, tc.reason)
			}
			switch {
			case tc.wantSecret == "" && p.Secret != nil:
				t.Errorf("the plan writes Secret %s/%s over what is there", p.Secret.Namespace, p.Secret.Name)
			case tc.wantSecret != "" && (p.Secret == nil || len(p.Secret.Data[tc.wantSecret]) == 0):
				t.Errorf("the plan writes %+v, want a copy under %q", p.Secret, tc.wantSecret)
			}
			if tc.wantRef == nil {
				if p.Create != nil {
					t.Errorf("an anvil Machine is made: %+v", p.Create.Spec)
				}
				return
			}
			if p.Create == nil {
				t.Fatal("no anvil Machine to make")
			}
			got, other := p.Create.Spec.UserDataRef, p.Create.Spec.IgnitionRef
			if tc.ignition {
				got, other = other, got
			}
			if other != nil || got == nil || *got != *tc.wantRef {
				t.Errorf("first boot %+v (and %+v), want %+v", got, other, tc.wantRef)
			}
		})
	}
	// Once the anvil Machine exists, the bootstrap provider's Secret is still never written.
	in := input(atName("cloud-config", "#cloud-config\n"), func(in *Input) { in.Existing = anvil(running) })
	if p := Decide(in); p.Secret != nil || p.Ready.Reason != infrav1.ReasonRunning {
		t.Errorf("with the anvil Machine running: Secret %+v, Ready %s", p.Secret, p.Ready.Reason)
	}
}

// A machine of a cluster with a control-plane load balancer is made only once the load
// balancer's endpoints are known (they are in its first boot); a control-plane machine's
// anvil Machine carries the label the load balancer selects.
func TestDecideWaitsForTheLoadBalancerAndLabelsControlPlanes(t *testing.T) {
	pending := input(func(in *Input) {
		in.LoadBalancer = &LoadBalancer{Endpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 16443}}
	})
	p := Decide(pending)
	if p.Create != nil || p.Ready.Reason != infrav1.ReasonWaitingForLoadBalancer || p.Ready.Message == "" {
		t.Errorf("without the segment endpoint: create %v, Ready %s %q; want no Machine, WaitingForLoadBalancer", p.Create != nil, p.Ready.Reason, p.Ready.Message)
	}
	worker := Decide(input()).Create
	if _, ok := worker.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		t.Errorf("a worker's anvil Machine has the control-plane label: %v", worker.Labels)
	}
	cp := Decide(input(func(in *Input) {
		in.Machine.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""}
	})).Create
	if v, ok := cp.Labels[clusterv1.MachineControlPlaneLabel]; !ok || v != "" {
		t.Errorf("a control-plane machine's anvil Machine labels %v, want %s", cp.Labels, clusterv1.MachineControlPlaneLabel)
	}
}
