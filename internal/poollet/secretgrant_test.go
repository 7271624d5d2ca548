package poollet_test

import (
	"context"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/poollet"
)

// stuckAfter is the poollet's default look-again (poollet.DefaultOptions), which these
// tests keep: a Machine that waited for it took that long to run.
var stuckAfter = poollet.DefaultOptions("").StuckAfter

// soon is how long after its Secret became readable a Machine may take to run: a third
// of stuckAfter, so a machine that waited for the look-again fails, with room for a slow
// shared machine.
var soon = stuckAfter / 3

// The manager grants a pool's poollet its Machines' Secrets when it sees them bound, the
// moment the poollet sees the same and reads: the read came back Forbidden and the Machine
// waited stuckAfter (30 s) to run. Here the poollet runs as its own ServiceAccount with
// the shipped roles and the real grants of the controller manager (secretaccess), with
// the default stuckAfter: Machines with user data and with Ignition run soon after they
// are created. A Machine whose Secret does not exist keeps saying so, and its Secret is
// read a bounded number of times in its first stuckAfter, counted at the poollet's HTTP
// transport (every request it sends the API server).
func TestFirstBootSecretsRunSoonWithTheManagersGrants(t *testing.T) {
	startControllers(t)
	ctx := context.Background()
	pool := "granted"
	identity := poolletIdentity(t, pool)
	reads := &secretReads{}
	identity.Wrap(reads.wrap)
	startPool(t, &testPool{t: t, name: pool, restConfig: identity, stuckAfter: stuckAfter}, nil)

	ns := "ns-" + pool
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{
		"user-data": {computev1alpha1.DefaultUserDataKey: []byte("#cloud-config\n")},
		"ignition":  {computev1alpha1.DefaultIgnitionKey: []byte(`{"ignition":{"version":"3.4.0"}}`)},
	} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	missing := newMachine(t, pool, "missing", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "never-made"}
	})
	bound := waitBound(t, missing)
	for _, tc := range []struct {
		name, secret string
		ref          func(*computev1alpha1.Machine, *computev1alpha1.SecretKeySelector)
	}{
		{"cloud-init", "user-data", func(m *computev1alpha1.Machine, s *computev1alpha1.SecretKeySelector) { m.Spec.UserDataRef = s }},
		{"ignition", "ignition", func(m *computev1alpha1.Machine, s *computev1alpha1.SecretKeySelector) { m.Spec.IgnitionRef = s }},
	} {
		created := time.Now()
		m := newMachine(t, pool, tc.name, func(m *computev1alpha1.Machine) {
			tc.ref(m, &computev1alpha1.SecretKeySelector{Name: tc.secret})
		})
		waitFor(t, m, "ran", inState(computev1alpha1.MachineStateRunning))
		took := time.Since(created)
		t.Logf("%s: created to Running in %v (its Secret read at %v)", tc.name, took.Round(time.Millisecond), reads.offsets(tc.secret, created))
		if took > soon {
			t.Errorf("%s: created to Running in %v, more than %v: it waited for the poollet's look-again (%v) after its Secret was granted",
				tc.name, took.Round(time.Millisecond), soon, stuckAfter)
		}
	}

	time.Sleep(time.Until(bound.Add(stuckAfter)))
	cur := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(missing), cur); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(cur.Status.Conditions, computev1alpha1.ConditionIgnitionReady); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != computev1alpha1.ReasonSecretNotFound {
		t.Errorf("a Machine whose Secret does not exist: IgnitionReady %+v, want False SecretNotFound", c)
	}
	// machineplan.SecretRetry's schedule reads at 0, 0.5, 1, 2, 4, 8 and 16 s: 7. A few more for
	// reconciles the poollet has other reasons for; a retry at its floor would be 60.
	at := reads.offsets("never-made", bound)
	t.Logf("the missing Secret was read %d times in the %v after its Machine was bound, at %v", len(at), stuckAfter, at)
	if len(at) == 0 || len(at) > 10 {
		t.Errorf("the missing Secret was read %d times in its Machine's first %v, want 1 to 10", len(at), stuckAfter)
	}
}

// A grant that comes a second and a half after the binding (given by the test itself
// here, to the poollet running as a user of the shipped poollet roles, so that the grant
// is surely late): the Machine runs soon after it, not stuckAfter after its first read.
// The same holds for a running Machine reimaged with a new Secret, which the manager
// grants once it sees the new ref: the reimage does not wait either.
func TestSecretGrantedLateIsReadSoon(t *testing.T) {
	startControllers(t)
	ctx := context.Background()
	pool := "lategrant"
	user := "lategrant-poollet"
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if err := env.InstallRBAC(ctx, "poollet",
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-poollet"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: computev1alpha1.PoolLeaseNamespace, Name: user}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "anvil-poollet"}},
	); err != nil {
		t.Fatal(err)
	}
	identity := rest.CopyConfig(env.Config)
	identity.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	reads := &secretReads{}
	identity.Wrap(reads.wrap)
	p := startPool(t, &testPool{t: t, name: pool, restConfig: identity, stuckAfter: stuckAfter}, knownImages)

	ns := "ns-" + pool
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "late", "second"} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{computev1alpha1.DefaultUserDataKey: []byte("#cloud-config\n# " + name + "\n")}}); err != nil {
			t.Fatal(err)
		}
	}
	grant := func(names ...string) {
		t.Helper()
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}}
		if _, err := controllerutil.CreateOrUpdate(ctx, env.Client, role, func() error {
			role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: names}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}
		if err := env.Client.Create(ctx, binding); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	grant("first")
	re := newMachine(t, pool, "reimaged", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "first"}
	})
	waitFor(t, re, "ran with its granted Secret", inState(computev1alpha1.MachineStateRunning))

	late := newMachine(t, pool, "late", func(m *computev1alpha1.Machine) {
		m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: "late"}
	})
	patchMachine(t, re, func(m *computev1alpha1.Machine) {
		m.Spec.Image, m.Spec.UserDataRef = otherImage, &computev1alpha1.SecretKeySelector{Name: "second"}
	})
	bound := waitBound(t, late)
	// Both really were refused first: the grant below is what they wait for.
	waitFor(t, late, "found its Secret unreadable", conditionIs(computev1alpha1.ConditionIgnitionReady, computev1alpha1.ReasonSecretNotFound))
	waitFor(t, re, "found its new Secret unreadable", conditionIs(computev1alpha1.ConditionIgnitionReady, computev1alpha1.ReasonSecretNotFound))
	time.Sleep(time.Until(bound.Add(1500 * time.Millisecond)))
	grant("first", "late", "second")
	granted := time.Now()

	waitFor(t, late, "ran once its Secret was granted", inState(computev1alpha1.MachineStateRunning))
	tookLate := time.Since(granted)
	waitFor(t, re, "was reimaged once its new Secret was granted", conditionIs(computev1alpha1.ConditionReimaging, computev1alpha1.ReasonReimaged))
	waitRuntime(t, p, re, "booted the new Secret", func(rm *mriv1alpha1.Machine) bool {
		return strings.Contains(string(rm.GetSpec().GetFirstBoot().GetData()), "# second")
	})
	tookRe := time.Since(granted)
	t.Logf("granted %v after binding; then Running in %v (reads of its Secret after binding %v); reimaged in %v (reads of the new Secret %v)",
		granted.Sub(bound).Round(time.Millisecond), tookLate.Round(time.Millisecond), reads.offsets("late", bound),
		tookRe.Round(time.Millisecond), reads.offsets("second", bound))
	if tookLate > soon {
		t.Errorf("a Machine whose Secret was granted late ran %v after the grant, more than %v: it waited for the look-again (%v)",
			tookLate.Round(time.Millisecond), soon, stuckAfter)
	}
	if tookRe > soon {
		t.Errorf("a Machine reimaged with a Secret granted late was reimaged %v after the grant, more than %v: it waited for the look-again (%v)",
			tookRe.Round(time.Millisecond), soon, stuckAfter)
	}
}

// waitBound waits until the scheduler bound m, and returns when it saw it.
func waitBound(t *testing.T, m *computev1alpha1.Machine) time.Time {
	t.Helper()
	waitFor(t, m, "bound", func(m *computev1alpha1.Machine) bool { return m != nil && m.Spec.MachinePoolRef != nil })
	return time.Now()
}

// secretReads records when a client read each Secret (GET .../secrets/<name>), at its
// HTTP transport: every read that reached the API server, whatever the answer.
type secretReads struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (s *secretReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if dir, name := path.Split(req.URL.Path); req.Method == http.MethodGet && strings.HasSuffix(dir, "/secrets/") {
			s.mu.Lock()
			if s.at == nil {
				s.at = map[string][]time.Time{}
			}
			s.at[name] = append(s.at[name], time.Now())
			s.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// offsets is when the Secret name was read, as offsets from start.
func (s *secretReads) offsets(name string, start time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, at := range s.at[name] {
		out = append(out, at.Sub(start).Round(10*time.Millisecond))
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
