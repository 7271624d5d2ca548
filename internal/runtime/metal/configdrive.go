package metal

import (
	"encoding/json"
	"maps"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// maxUserData bounds first-boot data: it must fit a Secret (1 MiB) beside its meta data.
const maxUserData = 512 << 10

// metaData is the config drive's meta_data.json (the OpenStack layout cloud-init and
// Ignition read): uuid is the Machine's uid, so a new Machine on the same server is a
// new instance to them; the hostname is the spec's (checked by mri.ValidateCreate), or
// the Machine's name when that is a hostname, or the machine id. The first-boot metadata
// is "meta", where OpenStack puts an instance's user-given metadata and cloud-init reads it
// (ds.meta_data.meta): the top-level keys have meanings of their own to cloud-init
// (public_keys, network_config, ...), which a tenant's key must not take by accident.
//
// hardware are the values of the first boot's hardware references (MRI rule F2), resolved
// from the HardwareData of the Host the machine is claiming: they join meta beside the
// spec's own keys, which they never share (mri.ValidateFirstBootMetaData).
func metaData(id string, labels map[string]string, spec *mriv1alpha1.MachineSpec, hardware map[string]string) ([]byte, error) {
	name := machineName(id, labels)
	hostname := spec.GetHostname()
	if hostname == "" {
		hostname = name
	}
	if !mri.IsHostname(hostname) {
		hostname = id
	}
	md := map[string]any{
		"uuid":           labels[mri.LabelMachineUID],
		"name":           name,
		"hostname":       hostname,
		"local-hostname": hostname,
	}
	meta := maps.Clone(spec.GetFirstBoot().GetMetaData())
	if len(hardware) > 0 && meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, hardware)
	if len(meta) > 0 {
		md["meta"] = meta
	}
	return json.Marshal(md)
}

// machineName is the Machine's name from the poollet's label, or the machine id for a
// caller that does not set it.
func machineName(id string, labels map[string]string) string {
	if n := labels[LabelMachineName]; n != "" {
		return n
	}
	return id
}

// configDriveText refuses user data that is not UTF-8 text: Ironic takes a config drive's
// user data as a JSON string, so binary data (gzip, a MIME archive with binary parts)
// would be mangled or refused at deploy, after a server was claimed for it.
func configDriveText(data []byte) error {
	if utf8.Valid(data) {
		return nil
	}
	return mri.Invalidf("the first-boot data (the Machine's userData Secret) is not UTF-8 text, and a server's config drive " +
		"carries it as text: put binary content base64-encoded inside the cloud-config (write_files with encoding: b64) instead")
}

// userData is the first-boot config, Ignition or cloud-init, as the server reads it.
func userData(spec *mriv1alpha1.MachineSpec) []byte {
	fb := spec.GetFirstBoot()
	if fb.GetFormat() == mriv1alpha1.ConfigFormat_CONFIG_FORMAT_NONE {
		return nil
	}
	return fb.GetData()
}

// configDriveSecret is the Secret a Host's spec.configDrive names for the machine, with the
// values of its hardware references on that Host.
func configDriveSecret(namespace, id string, labels map[string]string, spec *mriv1alpha1.MachineSpec, hardware map[string]string) (*corev1.Secret, error) {
	meta, err := metaData(id, labels, spec, hardware)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: configDriveName(labels[mri.LabelMachineUID]),
			Labels:      map[string]string{LabelConfigDrive: "true"},
			Annotations: map[string]string{AnnotationMachineID: id},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"meta_data": meta},
	}
	if ud := userData(spec); len(ud) > 0 {
		s.Data["user_data"] = ud
	}
	return s, nil
}
