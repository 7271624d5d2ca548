package ironic

import (
	"context"
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/harness"
)

func TestEnsureCredentials(t *testing.T) {
	env, err := harness.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	c := env.Client

	user, pass, err := EnsureCredentials(ctx, c, "default", "ironic-credentials")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := base64.RawURLEncoding.DecodeString(pass); err != nil || len(b) != 32 || user != DefaultUsername {
		t.Errorf("created %q / a password of %d bytes (%v), want %q and 32 random bytes base64url", user, len(b), err, DefaultUsername)
	}
	user2, pass2, err := EnsureCredentials(ctx, c, "default", "ironic-credentials")
	if err != nil || user2 != user || pass2 != pass {
		t.Errorf("second call returned other credentials (err %v)", err)
	}

	// A Secret written by hand keeps its values; a missing password is added.
	s := &corev1.Secret{}
	s.Namespace, s.Name = "default", "by-hand"
	s.Data = map[string][]byte{SecretUsernameKey: []byte("operator")}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	user, pass, err = EnsureCredentials(ctx, c, "default", "by-hand")
	if err != nil || user != "operator" || pass == "" {
		t.Fatalf("EnsureCredentials on a Secret without a password = %q, (%d chars), %v", user, len(pass), err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil || string(s.Data[SecretPasswordKey]) != pass {
		t.Errorf("the added password was not stored in the Secret (err %v)", err)
	}
}
