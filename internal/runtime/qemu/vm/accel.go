package vm

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// AccelAuto asks for kvm when a KVM guest of the host's architecture runs here (ProbeKVM),
// tcg otherwise: what a DaemonSet runs on nodes that differ.
const AccelAuto Accel = "auto"

// KVMDevice is where the host's KVM is opened.
const KVMDevice = "/dev/kvm"

// Accelerator is an accelerator chosen, and why the host's own architecture is emulated when
// it is, in words for a person (a pool's status, a log line).
type Accelerator struct {
	Accel Accel
	// Why is empty with kvm.
	Why string
}

// ChooseAccel resolves an accelerator asked for: tcg and kvm are taken as asked (kvm is
// the operator's word that it works), auto is kvm only when a KVM guest of the host's
// architecture runs here. Every place anvil starts QEMU chooses with this one function.
func ChooseAccel(ctx context.Context, want Accel) (Accelerator, error) {
	return chooseAccel(ctx, want, KVMDevice, ProbeKVM)
}

func chooseAccel(ctx context.Context, want Accel, device string,
	probe func(context.Context, string, computev1alpha1.Architecture) error) (Accelerator, error) {
	switch want {
	case AccelKVM:
		return Accelerator{Accel: AccelKVM}, nil
	case AccelTCG:
		return Accelerator{Accel: AccelTCG, Why: "the accelerator is set to tcg"}, nil
	case AccelAuto:
	default:
		return Accelerator{}, fmt.Errorf("accelerator %q: use tcg, kvm or auto", want)
	}
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return Accelerator{Accel: AccelTCG, Why: "no usable KVM: " + err.Error()}, nil
	}
	f.Close()
	arch := computev1alpha1.Architecture(goruntime.GOARCH)
	program, err := Binary(arch)
	if err != nil {
		return Accelerator{Accel: AccelTCG, Why: "no KVM for this host's architecture: " + err.Error()}, nil
	}
	if err := probe(ctx, program, arch); err != nil {
		return Accelerator{Accel: AccelTCG, Why: "KVM does not run guests here: " + err.Error()}, nil
	}
	return Accelerator{Accel: AccelKVM}, nil
}

// Native reports whether guests of arch run natively under a: with KVM, on a host of arch.
// TCG emulates every architecture, the host's own included.
func (a Accelerator) Native(arch computev1alpha1.Architecture) bool {
	return a.Accel == AccelKVM && string(arch) == goruntime.GOARCH
}

// Emulated says why guests of arch are emulated under a, "" when they run natively.
func (a Accelerator) Emulated(arch computev1alpha1.Architecture) string {
	switch {
	case a.Native(arch):
		return ""
	case string(arch) != goruntime.GOARCH:
		return fmt.Sprintf("%s guests are emulated on this %s host: hardware virtualisation runs only the host's own architecture", arch, goruntime.GOARCH)
	}
	return a.Why
}
