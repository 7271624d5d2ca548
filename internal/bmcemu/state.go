package bmcemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// stateFile, in a server's folder, is what its BMC keeps across the emulator's restarts, as
// a BMC keeps it in its own flash: a server powered on again after a restart boots what
// Ironic left inserted, with the override Ironic set.
const stateFile = "bmc.json"

// bmcState is the content of stateFile.
type bmcState struct {
	// Media is the image URL inserted in each slot; its file is mediaPath(slot).
	Media map[string]string `json:"media,omitempty"`
	// BootSourceOverrideTarget and BootSourceOverrideEnabled are the boot source override,
	// a Once override not yet spent included.
	BootSourceOverrideTarget  string `json:"bootSourceOverrideTarget"`
	BootSourceOverrideEnabled string `json:"bootSourceOverrideEnabled"`
	// SSHPort is the host port the running QEMU forwards to the server's SSH (the Spec's
	// when it started): an adopted QEMU keeps the port it was started with.
	SSHPort int `json:"sshPort,omitempty"`
}

// save writes the BMC's state: to a temporary file then renamed, so a crash leaves the old
// state or the new one. Called with mu held, before the change is reported done.
func (m *machine) save() error {
	raw, err := json.Marshal(bmcState{Media: m.media, BootSourceOverrideTarget: m.override,
		BootSourceOverrideEnabled: m.overrideEnabled, SSHPort: m.runningSSHPort})
	if err != nil {
		return err
	}
	path := m.path(stateFile)
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("the BMC's state of %s: %w", m.spec.Name, err)
	}
	_, err = f.Write(raw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("the BMC's state of %s: %w", m.spec.Name, err)
	}
	return nil
}

// load reads the BMC's state a previous emulator saved; a server never managed has none.
// A medium whose file is gone is not inserted. The file is written only by save, so one
// that does not parse was damaged from outside: an error, for a human to look at.
func (m *machine) load() error {
	raw, err := os.ReadFile(m.path(stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s bmcState
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("server %s: %s does not parse (%w): remove it to start with no media and no boot override", m.spec.Name, m.path(stateFile), err)
	}
	if !slices.Contains(overrideTargets, s.BootSourceOverrideTarget) || !slices.Contains(overrideModes, s.BootSourceOverrideEnabled) {
		return fmt.Errorf("server %s: %s holds boot override %q/%q: remove it to start with no media and no boot override",
			m.spec.Name, m.path(stateFile), s.BootSourceOverrideTarget, s.BootSourceOverrideEnabled)
	}
	m.override, m.overrideEnabled, m.runningSSHPort = s.BootSourceOverrideTarget, s.BootSourceOverrideEnabled, s.SSHPort
	for slot, url := range s.Media {
		if slot != slotCd && slot != slotUSB || url == "" {
			continue
		}
		if _, err := os.Stat(m.mediaPath(slot)); err != nil {
			m.log.Info("inserted medium forgotten: its file is gone", "slot", slot, "image", url, "error", err.Error())
			continue
		}
		m.media[slot] = url
	}
	return nil
}
