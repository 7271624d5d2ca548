package security

import (
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// attempt is one request an identity makes, and whether it must be allowed.
type attempt struct {
	what    string
	allowed bool
	do      func(ctx context.Context) error
}

// tryAll makes every attempt as who, logs each with the API server's answer, and fails the
// test for an attack let through, a refusal that is not Forbidden (or Invalid, an
// admission policy's), and anything the identity needs refused. refusal looks further at
// each refusal. Admission policies may take a moment to reach the admission plugin once
// installed, so the first attack is retried for a few seconds before the others are made.
func tryAll(t *testing.T, who string, attempts []attempt, refusal func(a attempt, err error)) {
	t.Helper()
	ctx := context.Background()
	first := -1
	for i, a := range attempts {
		if !a.allowed {
			first = i
			break
		}
	}
	var firstErr error
	if first >= 0 {
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			firstErr = attempts[first].do(ctx) // not the poll's context: its deadline would cut the last try short
			return firstErr != nil, nil
		})
	}
	refused := 0
	for i, a := range attempts {
		err := firstErr
		if i != first {
			err = a.do(ctx)
		}
		answer := "allowed"
		if err != nil {
			refused++
			answer = fmt.Sprintf("%s: %v", apierrors.ReasonForError(err), err)
		}
		t.Logf("%s: %-60s -> %s", who, a.what, answer)
		switch {
		case a.allowed && err != nil:
			t.Errorf("%s: %v, want it allowed", a.what, err)
		case !a.allowed && err == nil:
			t.Errorf("%s: allowed, want it refused", a.what)
		case !a.allowed && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want a refusal (Forbidden)", a.what, err)
		case !a.allowed && refusal != nil:
			refusal(a, err)
		}
	}
	t.Logf("%s: %d requests tried: %d refused, %d allowed", who, len(attempts), refused, len(attempts)-refused)
}

// serviceAccountToken is a client with a real bearer token of ServiceAccount ns/name (a
// TokenRequest, as its holder would be given), and nothing of the admin's credentials.
func serviceAccountToken(t *testing.T, ns, name string) client.Client {
	t.Helper()
	c, err := client.New(tokenConfig(tokenOf(t, ns, name)), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tokenOf is a new token of ServiceAccount ns/name, which it creates when missing.
func tokenOf(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, sa)); err != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("a token for %s: %v", sa.Name, err)
	}
	return tr.Status.Token
}

// tokenConfig reaches the test's API server with token and nothing else.
func tokenConfig(token string) *rest.Config {
	return &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
}
