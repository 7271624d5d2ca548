package fake

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// persistLocked writes every machine to the state file, through a rename so a crash
// mid-write keeps the previous state. mu must be held. Without a state file it does nothing.
func (r *Runtime) persistLocked() {
	if r.cfg.StateFile == "" {
		return
	}
	list := &mriv1alpha1.ListMachinesResponse{}
	for _, m := range r.machines {
		list.Machines = append(list.Machines, m)
	}
	raw, err := protojson.Marshal(list)
	if err != nil {
		return
	}
	tmp := r.cfg.StateFile + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return
	}
	_ = os.Rename(tmp, r.cfg.StateFile)
}

// load reads the state file, if any, and restores the id counter past every id in it.
func (r *Runtime) load() error {
	if r.cfg.StateFile == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.cfg.StateFile), 0o700); err != nil {
		return err
	}
	raw, err := os.ReadFile(r.cfg.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	list := &mriv1alpha1.ListMachinesResponse{}
	if err := protojson.Unmarshal(raw, list); err != nil {
		return fmt.Errorf("fake runtime state %s: %w", r.cfg.StateFile, err)
	}
	for _, m := range list.Machines {
		id := m.GetMetadata().GetId()
		r.machines[id] = m
		r.byUID[m.GetMetadata().GetLabels()[mri.LabelMachineUID]] = id
		var n uint64
		if _, err := fmt.Sscanf(id, r.cfg.Name+"-%d", &n); err == nil && n > r.nextID {
			r.nextID = n
		}
	}
	return nil
}
