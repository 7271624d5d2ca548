package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// hardwareData is the Host's HardwareData, nil when inspection has not written it.
func (r *Reconciler) hardwareData(ctx context.Context, h *metalv1alpha1.Host) (*metalv1alpha1.HardwareData, error) {
	hw := &metalv1alpha1.HardwareData{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Name}, hw)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return hw, nil
}

// registration builds what the provisioner needs, with the credentials Secret's
// resourceVersion so a changed Secret registers again. A missing or incomplete Secret
// comes back as a problem to report (the Secret's watch brings the Host back when fixed).
func (r *Reconciler) registration(ctx context.Context, h *metalv1alpha1.Host) (reg provisioner.Registration, version, problem string, err error) {
	reg = provisioner.Registration{
		Name: nodeName(h), BMCAddress: h.Spec.BMC.Address, BootMACAddress: h.Spec.BootMACAddress,
		DisableCertificateVerification: h.Spec.BMC.DisableCertificateVerification,
		Architecture:                   string(h.Spec.Architecture), RootDeviceHints: rootHints(h.Spec.RootDeviceHints),
	}
	ref := h.Spec.BMC.CredentialsSecretRef
	if ref == nil {
		if strings.HasPrefix(h.Spec.BMC.Address, "fake://") {
			return reg, "", "", nil
		}
		return reg, "", "spec.bmc.credentialsSecretRef is required for " + scheme(h.Spec.BMC.Address) + " BMCs", nil
	}
	sec := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: ref.Name}, sec)
	if apierrors.IsNotFound(err) {
		return reg, "", fmt.Sprintf("Secret %s/%s with the BMC credentials does not exist", h.Namespace, ref.Name), nil
	}
	if err != nil {
		return reg, "", "", err
	}
	user, pass := sec.Data["username"], sec.Data["password"]
	if len(user) == 0 || len(pass) == 0 {
		return reg, "", fmt.Sprintf("Secret %s/%s must have the keys username and password", h.Namespace, ref.Name), nil
	}
	reg.Username, reg.Password = string(user), string(pass)
	return reg, sec.ResourceVersion, "", nil
}

func scheme(address string) string {
	s, _, _ := strings.Cut(address, "://")
	return s
}

func rootHints(h *metalv1alpha1.RootDeviceHints) map[string]any {
	if h == nil {
		return nil
	}
	m := map[string]any{}
	if h.DeviceName != "" {
		m["name"] = h.DeviceName
	}
	if h.SerialNumber != "" {
		m["serial"] = h.SerialNumber
	}
	if h.WWN != "" {
		m["wwn"] = h.WWN
	}
	if h.MinSizeGigabytes > 0 {
		m["size"] = fmt.Sprintf(">= %d", h.MinSizeGigabytes)
	}
	if h.Rotational != nil {
		m["rotational"] = *h.Rotational
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// configDrive reads the Host's config-drive Secret. A missing Secret is reported by
// message, not error: it is the user's (or the metal runtime's) to create.
func (r *Reconciler) configDrive(ctx context.Context, h *metalv1alpha1.Host) (*provisioner.ConfigDrive, string, error) {
	if h.Spec.ConfigDrive == nil {
		return nil, "", nil
	}
	sec := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Spec.ConfigDrive.Name}, sec)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("config drive Secret %s/%s does not exist", h.Namespace, h.Spec.ConfigDrive.Name), nil
	}
	if err != nil {
		return nil, "", err
	}
	d := &provisioner.ConfigDrive{UserData: sec.Data["user_data"]}
	for key, dst := range map[string]*map[string]any{"meta_data": &d.MetaData, "network_data": &d.NetworkData} {
		raw, ok := sec.Data[key]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, fmt.Sprintf("config drive Secret %s/%s: %s is not a JSON object: %v", h.Namespace, sec.Name, key, err), nil
		}
	}
	return d, "", nil
}

// writeHardware records inspection results as the Host's HardwareData and summary.
func (r *Reconciler) writeHardware(ctx context.Context, h *metalv1alpha1.Host, hw provisioner.Hardware) error {
	d := &metalv1alpha1.HardwareData{}
	d.Namespace, d.Name = h.Namespace, h.Name
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
		d.Spec = HardwareSpec(hw, h)
		return controllerutil.SetOwnerReference(h, d, r.Client.Scheme())
	})
	if err != nil {
		return err
	}
	h.Status.Hardware = Summary(&d.Spec)
	return nil
}
