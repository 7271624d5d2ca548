package ironic

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the credentials Secret, and the user name a new Secret gets.
const (
	SecretUsernameKey = "username"
	SecretPasswordKey = "password"
	DefaultUsername   = "anvil"
)

// EnsureCredentials returns Ironic's API credentials from the Secret namespace/name,
// creating the Secret (or the keys it lacks) with a random 32-byte password, so the
// password stays the same across restarts of anvil. The password is never logged.
func EnsureCredentials(ctx context.Context, c client.Client, namespace, name string) (username, password string, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		var s corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			s = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Type:       corev1.SecretTypeOpaque,
			}
			if err := fill(&s); err != nil {
				return "", "", err
			}
			if err := c.Create(ctx, &s); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue // created meanwhile by another process; read theirs
				}
				return "", "", fmt.Errorf("creating Secret %s/%s for Ironic's credentials: %w", namespace, name, err)
			}
		case err != nil:
			return "", "", fmt.Errorf("reading Secret %s/%s with Ironic's credentials: %w", namespace, name, err)
		case len(s.Data[SecretUsernameKey]) == 0 || len(s.Data[SecretPasswordKey]) == 0:
			if err := fill(&s); err != nil {
				return "", "", err
			}
			if err := c.Update(ctx, &s); err != nil {
				if apierrors.IsConflict(err) {
					continue
				}
				return "", "", fmt.Errorf("completing Secret %s/%s with Ironic's credentials: %w", namespace, name, err)
			}
		}
		return string(s.Data[SecretUsernameKey]), string(s.Data[SecretPasswordKey]), nil
	}
	return "", "", fmt.Errorf("the Secret %s/%s with Ironic's credentials keeps changing; try again", namespace, name)
}

// fill sets the keys s lacks.
func fill(s *corev1.Secret) error {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if len(s.Data[SecretUsernameKey]) == 0 {
		s.Data[SecretUsernameKey] = []byte(DefaultUsername)
	}
	if len(s.Data[SecretPasswordKey]) == 0 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("generating Ironic's password: %w", err)
		}
		s.Data[SecretPasswordKey] = []byte(base64.RawURLEncoding.EncodeToString(b))
	}
	return nil
}
