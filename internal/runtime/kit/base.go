package kit

import (
	"context"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// Version of the runtimes built on the kit, reported by the Version call.
const Version = "0.1.0"

// Base is what a runtime built on the kit embeds: the calls every such runtime answers
// alike (Version, ListMachines, WatchEvents) and the lifecycle and views behind them. A
// runtime whose machines keep their devices embeds mutate.Fixed beside it, whose
// hot-plug answers then win over the unimplemented ones embedded here.
type Base[T any] struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer
	*Lifecycle
	Views *Views[T]

	kind, pool string
}

// NewBase makes the base of a runtime of kind ("metal") for pool, whose Run starts by
// reading ("reading its Hosts").
func NewBase[T any](kind, pool, reading string) Base[T] {
	return Base[T]{Lifecycle: NewLifecycle(kind+" runtime", reading), Views: NewViews[T](), kind: kind, pool: pool}
}

func (b *Base[T]) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: b.kind + "/" + b.pool, RuntimeVersion: Version, MriVersion: "v1alpha1", Pool: b.pool}, nil
}

func (b *Base[T]) ListMachines(ctx context.Context, req *mriv1alpha1.ListMachinesRequest) (*mriv1alpha1.ListMachinesResponse, error) {
	if err := b.AwaitReady(ctx); err != nil {
		return nil, err
	}
	return b.Views.List(req), nil
}

// WatchEvents sends every machine, then every change, until the client goes away or the
// runtime closes.
func (b *Base[T]) WatchEvents(_ *mriv1alpha1.WatchEventsRequest, stream mriv1alpha1.MachineRuntime_WatchEventsServer) error {
	if err := b.AwaitReady(stream.Context()); err != nil {
		return err
	}
	return b.Views.Watch(stream)
}

// Machine is a copy of the machine with id, once the runtime answers; NOT_FOUND when there
// is none. It is what mutate.Fixed reads.
func (b *Base[T]) Machine(ctx context.Context, id string) (*mriv1alpha1.Machine, error) {
	if err := b.AwaitReady(ctx); err != nil {
		return nil, err
	}
	m, _, _, err := b.Views.ByID(id)
	return m, err
}
