package qemu

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// addVolume gives a volume of the spec a device with a fresh QEMU id. Its disk file is
// made later (prepare); Path is only decided here.
func (rec *record) addVolume(v *mriv1alpha1.Volume) *device {
	d := &device{Kind: kindVolume, Name: v.GetName(), QEMUID: fmt.Sprintf("vol%d", rec.NextDevice), Port: -1}
	rec.NextDevice++
	if v.GetHandle() == "" {
		d.Owned, d.Format = true, string(vm.FormatQCOW2)
	}
	rec.Devices = append(rec.Devices, d)
	return d
}

// addNIC gives a NIC of the spec a device; it needs no file, so it is ready at once.
func (rec *record) addNIC(id string, n *mriv1alpha1.NetworkInterface) *device {
	d := &device{Kind: kindNIC, Name: n.GetName(), QEMUID: fmt.Sprintf("nic%d", rec.NextDevice), Port: -1, Ready: true, MAC: n.GetMacAddress(), Network: n.GetNetwork()}
	rec.NextDevice++
	if d.MAC == "" {
		d.MAC = derivedMAC(id, n.GetName())
	}
	rec.Devices = append(rec.Devices, d)
	return d
}

// active returns the device of the spec's volume or NIC called name.
func (rec *record) active(kind deviceKind, name string) *device {
	for _, d := range rec.Devices {
		if d.Kind == kind && d.Name == name && !d.Detached {
			return d
		}
	}
	return nil
}

// detach marks the device of the spec's volume or NIC called name detached: the device
// stays in the record until the worker has unplugged and released it.
func (rec *record) detach(kind deviceKind, name string) {
	if d := rec.active(kind, name); d != nil {
		d.Detached = true
	}
}

// device returns the device with this QEMU id, nil when it is gone.
func (rec *record) device(qemuID string) *device {
	for _, d := range rec.Devices {
		if d.QEMUID == qemuID {
			return d
		}
	}
	return nil
}

// remove forgets a device.
func (rec *record) remove(d *device) {
	for i, have := range rec.Devices {
		if have == d {
			rec.Devices = append(rec.Devices[:i], rec.Devices[i+1:]...)
			return
		}
	}
}

// volume returns the spec's volume behind a device.
func (rec *record) volume(d *device) *mriv1alpha1.Volume {
	if d == nil {
		return nil
	}
	for _, v := range rec.Machine.GetSpec().GetVolumes() {
		if v.GetName() == d.Name {
			return v
		}
	}
	return nil
}

// derivedMAC is a stable locally administered address in QEMU's 52:54:00 range.
func derivedMAC(id, name string) string {
	h := sha256.Sum256([]byte(id + "/" + name))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// handlePattern: a handle names a file below <state>/volumes, such as "default/data".
var handlePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$`)

// handlePath is where the disk of a volume handle lives.
func handlePath(state, handle string) string {
	return filepath.Join(state, volumesDir, filepath.FromSlash(handle))
}

// handleFormat is the format a handle volume's file is opened with, decided by its name,
// never probed from its bytes: a guest writes its raw disk, so a probe would let it write
// a qcow2 header naming a host file (say /etc/shadow) that QEMU then opens as the disk.
// A file named *.qcow2 is qcow2, and its header must name no other file; any other is raw.
func handleFormat(path string) (vm.DiskFormat, error) {
	if !strings.HasSuffix(path, ".qcow2") {
		return vm.FormatRaw, nil
	}
	if err := osimage.CheckQCOW2File(path); err != nil {
		return "", err
	}
	return vm.FormatQCOW2, nil
}

// validateVolume refuses a volume to attach: the contract's check, then this runtime's.
func validateVolume(v *mriv1alpha1.Volume) error {
	if err := mri.ValidateVolume(v); err != nil {
		return err
	}
	return validateHandle(v)
}

// validateHandle refuses a handle that is not a path below the volumes folder.
func validateHandle(v *mriv1alpha1.Volume) error {
	if h, ok := v.GetSource().(*mriv1alpha1.Volume_Handle); ok && (!handlePattern.MatchString(h.Handle) || strings.Contains(h.Handle, "..")) {
		return mri.Invalidf("volume %s: handle %q must be a relative path of letters, digits, '.', '_' and '-'", v.GetName(), h.Handle)
	}
	return nil
}
