package poollet

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet/firstboot"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// ImageResolver turns an image reference into the digest a runtime boots.
type ImageResolver interface {
	Resolve(ctx context.Context, reference string, arch computev1alpha1.Architecture) (digest string, err error)
}

// RegistryImages resolves a reference that carries its digest (name@sha256:...) without
// asking anyone, since a digest is already resolved, and a tag by asking the image's
// registry. The digest may be an index's: the runtime picks its architecture's entry.
type RegistryImages struct {
	Registry *imageref.Registry
}

// NewRegistryImages reads tags through network: its timeouts, and its allow-list of
// registries on loopback, link-local or private addresses (all others refused). A poollet
// beside a runtime passes the runtime's image cache's, so both refuse the same registries.
func NewRegistryImages(network registrynet.Policy) RegistryImages {
	return RegistryImages{Registry: &imageref.Registry{TagTTL: 30 * time.Second, Transport: network.Transport()}}
}

// Resolve returns the digest of the reference.
func (r RegistryImages) Resolve(ctx context.Context, reference string, _ computev1alpha1.Architecture) (string, error) {
	if _, digest, pinned := strings.Cut(reference, "@"); pinned {
		if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
			return "", fmt.Errorf("image %q: the digest must be sha256:<64 hex digits>", reference)
		}
		return digest, nil
	}
	return r.Registry.Digest(ctx, reference)
}

// firstBootError says why the first-boot config cannot be used (a missing Secret or key,
// an invalid Ignition config), for the IgnitionReady condition. unread marks a Secret the
// API server would not give (absent, or not granted to this pool yet).
type firstBootError struct {
	reason, msg string
	unread      bool
}

func (e *firstBootError) Error() string { return e.msg }

// firstBoot reads the Machine's Ignition or cloud-init Secret, and carries its metadata
// (spec.metaData and the hardware references of spec.hardwareMetaData) beside it. It reads the one Secret by name, uncached: the poollet never
// lists or watches Secrets.
func firstBoot(ctx context.Context, reader client.Reader, m *computev1alpha1.Machine) (*mriv1alpha1.FirstBootConfig, error) {
	fb, err := firstBootData(ctx, reader, m)
	if fb != nil && len(m.Spec.MetaData) > 0 {
		fb.MetaData = maps.Clone(m.Spec.MetaData)
	}
	if fb != nil {
		// The runtime resolves them from the hardware it gives the machine (MRI rule F2).
		fb.HardwareMetaData = mri.HardwareMetaDataToMRI(m.Spec.HardwareMetaData)
	}
	return fb, err
}

func firstBootData(ctx context.Context, reader client.Reader, m *computev1alpha1.Machine) (*mriv1alpha1.FirstBootConfig, error) {
	ref, key, format := m.Spec.IgnitionRef, computev1alpha1.DefaultIgnitionKey, mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION
	if ref == nil {
		ref, key, format = m.Spec.UserDataRef, computev1alpha1.DefaultUserDataKey, mriv1alpha1.ConfigFormat_CONFIG_FORMAT_CLOUD_INIT
	}
	if ref == nil {
		return &mriv1alpha1.FirstBootConfig{Format: mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE}, nil
	}
	if ref.Key != "" {
		key = ref.Key
	}
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, &firstBootError{computev1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s does not exist (or this pool may not read it)", ref.Name), true}
		}
		return nil, err
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, &firstBootError{computev1alpha1.ReasonSecretNotFound, fmt.Sprintf("Secret %s has no key %q", ref.Name, key), false}
	}
	if format == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_IGNITION {
		if err := firstboot.ValidateIgnition(data); err != nil {
			return nil, &firstBootError{computev1alpha1.ReasonIgnitionInvalid, fmt.Sprintf("Secret %s key %q: %v", ref.Name, key, err), false}
		}
	}
	return &mriv1alpha1.FirstBootConfig{Format: format, Data: data}, nil
}
