package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// eventually calls check until it returns true, for up to limit; it fails the test with
// check's last description of what it saw.
func eventually(t *testing.T, limit time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	var seen string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var ok bool
		if ok, seen = check(); ok {
			return
		}
	}
	t.Fatalf("not %s within %s; last seen: %s", what, limit, seen)
}

// machines lists the Machines of namespace ns with labels.
func (s *site) machines(t *testing.T, ns string, labels map[string]string) []computev1alpha1.Machine {
	t.Helper()
	l := &computev1alpha1.MachineList{}
	if err := s.c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatalf("listing Machines in %s: %v", s.name, err)
	}
	return l.Items
}

// brokered are the site's Machines the broker of pool made.
func (s *site) brokered(t *testing.T, pool string) []computev1alpha1.Machine {
	t.Helper()
	return s.machines(t, brokerNamespace, map[string]string{mapping.LabelPool: pool})
}

// brokeredSecrets are the site's Secrets the broker of pool made.
func (s *site) brokeredSecrets(t *testing.T, pool string) []corev1.Secret {
	t.Helper()
	l := &corev1.SecretList{}
	if err := s.c.List(context.Background(), l, client.InNamespace(brokerNamespace), client.MatchingLabels{mapping.LabelPool: pool}); err != nil {
		t.Fatalf("listing Secrets in %s: %v", s.name, err)
	}
	return l.Items
}

// downstreamOf is the site's Machines made for the upstream Machine of uid.
func (s *site) downstreamOf(t *testing.T, uid string) []computev1alpha1.Machine {
	t.Helper()
	return s.machines(t, brokerNamespace, map[string]string{mapping.LabelUpstreamUID: uid})
}

// machine reads one Machine of the region's tenant namespace.
func (s *site) machine(t *testing.T, name string) *computev1alpha1.Machine {
	t.Helper()
	m := &computev1alpha1.Machine{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: tenant, Name: name}, m); err != nil {
		t.Fatalf("reading Machine %s/%s in %s: %v", tenant, name, s.name, err)
	}
	return m
}

// condition is a Machine's condition of type, "<none>" when it has none, as one line.
func condition(m *computev1alpha1.Machine, typ string) string {
	c := meta.FindStatusCondition(m.Status.Conditions, typ)
	if c == nil {
		return typ + "=<none>"
	}
	return typ + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message
}

// waitConsole waits until the console log holds line.
func waitConsole(t *testing.T, kubeconfig, ns, name, line string) {
	t.Helper()
	eventually(t, 4*time.Minute, "the console showing "+line, func() (bool, string) {
		log, err := env.ConsoleLog(t, kubeconfig, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(log, line), log
	})
}
