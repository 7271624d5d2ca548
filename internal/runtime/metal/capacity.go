package metal

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	gproto "google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/metal/placement"
)

// Status reports the Hosts that count (placement.Inventory.Counts) as both capacity and
// allocatable: allocatable is never reduced by machines (the scheduler subtracts them).
func (r *Runtime) Status(ctx context.Context, _ *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	inv, err := r.inventory(ctx)
	if err != nil {
		return nil, err
	}
	classes := &computev1alpha1.MachineClassList{}
	if err := r.opts.Cache.List(ctx, classes); err != nil {
		return nil, unavailable("listing MachineClasses", err)
	}
	c := inv.Capacity()
	res := &mriv1alpha1.Resources{MilliCpu: c.MilliCPU, MemoryBytes: c.MemoryBytes,
		Extended: map[string]int64{placement.ResourceHosts: c.Hosts}}
	resp := &mriv1alpha1.StatusResponse{
		Capacity:    res,
		Allocatable: gproto.Clone(res).(*mriv1alpha1.Resources),
	}
	for _, a := range c.Architectures {
		// Bare metal runs each architecture on servers of that architecture.
		resp.Architectures = append(resp.Architectures, mri.ArchToMRI(a))
		resp.NativeArchitectures = append(resp.NativeArchitectures, mri.ArchToMRI(a))
	}
	ptrs := make([]*computev1alpha1.MachineClass, len(classes.Items))
	for i := range classes.Items {
		ptrs[i] = &classes.Items[i]
	}
	resp.SupportedClasses = inv.SupportedClasses(ptrs)
	return resp, nil
}

// inventory is the pool as now known: the Hosts held in memory, the HardwareData and
// HostPolicies of the cache.
func (r *Runtime) inventory(ctx context.Context) (placement.Inventory, error) {
	var inv placement.Inventory
	r.mu.Lock()
	for _, h := range r.hosts {
		inv.Hosts = append(inv.Hosts, h)
	}
	r.mu.Unlock()
	policies := &metalv1alpha1.HostPolicyList{}
	if err := r.opts.Cache.List(ctx, policies, client.InNamespace(r.opts.Namespace)); err != nil {
		return inv, unavailable("listing HostPolicies", err)
	}
	for i := range policies.Items {
		inv.Policies = append(inv.Policies, &policies.Items[i])
	}
	hw := &metalv1alpha1.HardwareDataList{}
	if err := r.opts.Cache.List(ctx, hw, client.InNamespace(r.opts.Namespace)); err != nil {
		return inv, unavailable("listing HardwareData", err)
	}
	inv.Hardware = map[string]*metalv1alpha1.HardwareDataSpec{}
	for i := range hw.Items {
		inv.Hardware[hw.Items[i].Name] = &hw.Items[i].Spec
	}
	return inv, nil
}

// namespaceLabels are the labels of a tenant namespace, for HostPolicies' selectors; nil
// when it does not exist (then only policies naming it allow it).
func (r *Runtime) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns := &corev1.Namespace{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, unavailable("reading namespace "+name, err)
	}
	return ns.Labels, nil
}

// unavailable is a failure to reach the API server: the caller retries.
func unavailable(what string, err error) error {
	return status.Error(codes.Unavailable, fmt.Sprintf("metal runtime: %s: %v", what, err))
}
