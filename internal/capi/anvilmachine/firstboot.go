package anvilmachine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// Keys and formats of a Cluster API bootstrap data Secret (the bootstrap provider contract:
// the data under "value"; kubeadm's provider adds "format").
const (
	BootstrapValueKey  = "value"
	BootstrapFormatKey = "format"

	FormatCloudConfig = "cloud-config"
	FormatIgnition    = "ignition"
)

// FirstBoot is a Machine's first-boot configuration taken from its bootstrap data.
type FirstBoot struct {
	// Ignition is true for an Ignition config, false for cloud-init user data.
	Ignition bool
	Data     []byte
}

// Key is the key the first-boot Secret holds the data under: the anvil Machine's default
// key for its kind, so its reference names no key.
func (f FirstBoot) Key() string {
	if f.Ignition {
		return computev1alpha1.DefaultIgnitionKey
	}
	return computev1alpha1.DefaultUserDataKey
}

// ReadBootstrap takes the first-boot configuration out of a bootstrap data Secret. A missing
// format means cloud-config, as Cluster API's bootstrap providers write it.
func ReadBootstrap(s *corev1.Secret) (FirstBoot, error) {
	value, ok := s.Data[BootstrapValueKey]
	if !ok || len(value) == 0 {
		return FirstBoot{}, fmt.Errorf("bootstrap data Secret %s/%s has no %q key: the bootstrap provider must write the data there", s.Namespace, s.Name, BootstrapValueKey)
	}
	switch format := string(s.Data[BootstrapFormatKey]); format {
	case "", FormatCloudConfig:
		return FirstBoot{Data: value}, nil
	case FormatIgnition:
		return FirstBoot{Ignition: true, Data: value}, nil
	default:
		return FirstBoot{}, fmt.Errorf("bootstrap data Secret %s/%s has format %q: anvil boots %q or %q; set the bootstrap provider's format to one of them", s.Namespace, s.Name, format, FormatCloudConfig, FormatIgnition)
	}
}
