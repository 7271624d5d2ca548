package qemu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// indexTimeout bounds the synchronous read of the image's index at create.
const indexTimeout = 10 * time.Second

func (r *Runtime) CreateMachine(ctx context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	in := req.GetMachine()
	if err := mri.ValidateCreate(in); err != nil {
		return nil, err
	}
	spec := in.GetSpec()
	if err := r.checkSegmentNICs(in.GetMetadata().GetLabels(), spec.GetNetworkInterfaces()...); err != nil {
		return nil, err
	}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	uid := in.GetMetadata().GetLabels()[mri.LabelMachineUID]
	if existing, err := r.byUIDClone(uid); existing != nil || err != nil {
		return &mriv1alpha1.CreateMachineResponse{Machine: existing}, err
	}
	arch, ok := r.archs[spec.GetArchitecture()]
	if !ok {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE,
			"pool %s runs %v, not %s", r.cfg.Name, r.cfg.Architectures, spec.GetArchitecture())
	}
	if err := r.admit(spec.GetResources()); err != nil {
		return nil, err
	}
	if err := r.checkImage(ctx, spec.GetImage(), arch); err != nil {
		return nil, err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	if id, ok := r.byUID[uid]; ok { // created meanwhile by a concurrent call
		return &mriv1alpha1.CreateMachineResponse{Machine: proto.Clone(r.machines[id].rec.Machine).(*mriv1alpha1.Machine)}, nil
	}
	if err := r.admitLocked(spec.GetResources()); err != nil {
		return nil, err
	}
	id, err := r.newID()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "choosing a machine id: %v", err)
	}
	m := &machine{rec: newRecord(id, in), poke: make(chan struct{}, 1)}
	observeStatus(m.rec, &m.obs, MachineDir(r.cfg.StateDir, id), time.Now())
	if err := r.createFolder(id, m.rec); err != nil {
		return nil, status.Errorf(codes.Unavailable, "writing machine %s: %v", id, err)
	}
	r.machines[id], r.byUID[uid] = m, id
	r.events.Publish(mriv1alpha1.MachineEvent_TYPE_ADDED, m.rec.Machine)
	r.startWorker(id, m)
	r.cfg.Logger.Info("machine created", "id", id, "uid", uid, "architecture", arch)
	return &mriv1alpha1.CreateMachineResponse{Machine: proto.Clone(m.rec.Machine).(*mriv1alpha1.Machine)}, nil
}

func (r *Runtime) byUIDClone(uid string) (*mriv1alpha1.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	if id, ok := r.byUID[uid]; ok {
		return proto.Clone(r.machines[id].rec.Machine).(*mriv1alpha1.Machine), nil
	}
	return nil, nil
}

// newRecord is a new machine's record: its metadata, the spec as given, and a device for
// each of the spec's volumes and NICs.
func newRecord(id string, in *mriv1alpha1.Machine) *record {
	rec := &record{
		Phase: phaseCreating,
		Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{
				Id: id, Labels: in.GetMetadata().GetLabels(), Annotations: in.GetMetadata().GetAnnotations(),
				Generation: 1, CreatedAtUnixNano: time.Now().UnixNano(),
			},
			Spec:   proto.Clone(in.GetSpec()).(*mriv1alpha1.MachineSpec),
			Status: &mriv1alpha1.MachineStatus{State: mriv1alpha1.MachineState_MACHINE_STATE_PENDING},
		},
	}
	for _, v := range rec.Machine.Spec.Volumes {
		rec.addVolume(v)
	}
	for _, n := range rec.Machine.Spec.NetworkInterfaces {
		rec.addNIC(id, n)
	}
	return rec
}

// createFolder writes the record into a temporary folder and renames it into place: a
// machine folder always holds a record, and a crash before the rename leaves a .new-
// folder that the next start removes.
func (r *Runtime) createFolder(id string, rec *record) error {
	root := filepath.Join(r.cfg.StateDir, machinesDir)
	tmp := filepath.Join(root, newPrefix+id)
	if err := os.MkdirAll(filepath.Join(tmp, disksDir), 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeRecord(tmp, raw); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(root, id)); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

// newID returns an id no machine of this state directory has or had: random, so it is
// not reused even if the state directory is lost. mu must be held.
func (r *Runtime) newID() (string, error) {
	for range 10 {
		b := make([]byte, 6)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		id := r.cfg.Name + "-" + hex.EncodeToString(b)
		if _, taken := r.machines[id]; taken {
			continue
		}
		if _, err := os.Lstat(MachineDir(r.cfg.StateDir, id)); err == nil {
			continue
		}
		return id, nil
	}
	return "", errors.New("no free id after 10 tries")
}

// minMemory is the least memory a machine of this runtime may ask for.
const minMemory = 16 << 20

// validateSpec refuses, after mri.ValidateCreate, what this runtime cannot run: too
// little memory for a guest, an image reference its registry client cannot read, a
// volume handle outside its volumes folder.
func validateSpec(s *mriv1alpha1.MachineSpec) error {
	if s.GetResources().GetMemoryBytes() < minMemory {
		return mri.Invalidf("spec.resources.memory_bytes is %d: a QEMU machine needs at least 16 MiB", s.GetResources().GetMemoryBytes())
	}
	if _, err := pinned(s.GetImage()); err != nil {
		return mri.Invalidf("spec.image: %v", err)
	}
	for _, v := range s.GetVolumes() {
		if err := validateHandle(v); err != nil {
			return err
		}
	}
	return checkHardwareRefs(s.GetFirstBoot().GetHardwareMetaData(), specNICs(s))
}

// pinned is the image reference pinned to its digest, as the cache and index read it.
func pinned(img *mriv1alpha1.Image) (string, error) {
	ref, err := name.ParseReference(img.GetReference())
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(img.GetDigest(), "sha256:") {
		return "", fmt.Errorf("digest %q is not sha256:<hex>", img.GetDigest())
	}
	return ref.Context().Name() + "@" + img.GetDigest(), nil
}

// checkImage refuses, before the call returns, an image that does not exist or has no
// entry for the machine's architecture, so the caller can place the machine elsewhere.
// Any other failure to read the index is left to the pull, which retries.
func (r *Runtime) checkImage(ctx context.Context, img *mriv1alpha1.Image, arch computev1alpha1.Architecture) error {
	ref, err := pinned(img)
	if err != nil {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "spec.image: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	archs, err := r.cfg.Index.Architectures(ctx, ref)
	if err != nil {
		if registryNotFound(err) {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_IMAGE_NOT_FOUND, "image %s: %v", ref, err)
		}
		r.cfg.Logger.Info("image index unreadable at create; the pull will retry", "image", ref, "error", err)
		return nil
	}
	if len(archs) == 0 {
		return nil // the image does not say; the pull finds out
	}
	for _, a := range archs {
		if a == arch {
			return nil
		}
	}
	return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_WRONG_ARCHITECTURE, "image %s offers %v, not %s", ref, archs, arch)
}

// registryNotFound reports whether a registry said the repository or manifest does not
// exist.
func registryNotFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == 404 {
		return true
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return true
		}
	}
	return false
}

// admit refuses a machine that does not fit (CONTRACT.md E5).
func (r *Runtime) admit(want *mriv1alpha1.Resources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.admitLocked(want)
}

func (r *Runtime) admitLocked(want *mriv1alpha1.Resources) error {
	used := &mriv1alpha1.Resources{}
	for _, m := range r.machines {
		if m.rec.Machine.GetStatus().GetState() != mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED {
			add(used, m.rec.Machine.GetSpec().GetResources())
		}
	}
	if why := fits(r.capacity, used, want); why != "" {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CAPACITY, "pool %s is full: %s", r.cfg.Name, why)
	}
	return nil
}
