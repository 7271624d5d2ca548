package broker

import (
	"context"
	"maps"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
)

// change edits a copy of the machine (its spec and labels) or asks a reboot; it reports
// whether anything changed.
type change func(m *mriv1alpha1.Machine, reboot *string) (bool, error)

// mutate applies fn to machine id and writes what changed downstream, retrying on
// conflicts: the first-boot Secret first when its data changed, then the Machine with
// its record. A call that changes nothing writes nothing (E3).
func (r *Runtime) mutate(ctx context.Context, id string, fn change) (*mriv1alpha1.Machine, error) {
	if err := r.AwaitReady(ctx); err != nil {
		return nil, err
	}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		_, name, err := r.machine(id)
		if err != nil {
			return err
		}
		dm := &computev1alpha1.Machine{}
		if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, dm); err != nil {
			if apierrors.IsNotFound(err) {
				return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
			}
			return err
		}
		if string(dm.UID) != id {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q not found", id)
		}
		// The machine as the object just read says, not as the informer last did.
		r.mu.Lock()
		data := r.data[name]
		r.mu.Unlock()
		cur, err := mapping.Upstream(mapping.Observed{Machine: dm, SecretData: data})
		if err != nil {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "machine %q: %v", id, err)
		}
		next := proto.Clone(cur).(*mriv1alpha1.Machine)
		var reboot string
		changed, err := fn(next, &reboot)
		if err != nil || !changed {
			return err
		}
		if d := mapping.SecretData(next.Spec.GetFirstBoot()); d != nil && !maps.EqualFunc(d, mapping.SecretData(cur.Spec.GetFirstBoot()), bytesEqual) {
			if err := r.writeSecret(ctx, name, d); err != nil {
				return err
			}
		}
		out, err := mapping.Update(r.target, dm, cur.Spec, mapping.Change{Spec: next.Spec, Labels: next.Metadata.Labels, Reboot: reboot})
		if err != nil {
			return refusal(err)
		}
		if equality.Semantic.DeepEqual(out, dm) {
			return nil // a reboot asked already (E3)
		}
		if err := r.opts.Client.Update(ctx, out); err != nil {
			return err
		}
		if out, err = r.settleRecord(ctx, dm, out); err != nil {
			return err
		}
		r.observe(out)
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, downstreamError("updating machine "+id, err)
	}
	m, _, err := r.machine(id)
	return m, err
}

// settleRecord makes the record's downstream generation the one the API server gave the
// write when the two differ (the server, not mapping.Update, decides whether a spec
// changed): status is trusted only once the downstream observed that generation.
func (r *Runtime) settleRecord(ctx context.Context, before, out *computev1alpha1.Machine) (*computev1alpha1.Machine, error) {
	rec, spec, err := mapping.DecodeRecord(out.Annotations[mapping.AnnotationRecord])
	if err != nil {
		return nil, err
	}
	if rec.DownstreamGeneration <= out.Generation && (out.Generation == before.Generation || rec.DownstreamGeneration == out.Generation) {
		return out, nil
	}
	rec.DownstreamGeneration = out.Generation
	if err := mapping.SetRecord(out, rec, spec); err != nil {
		return nil, err
	}
	if err := r.opts.Client.Update(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// writeSecret gives the first-boot Secret of name data, making it if it is gone.
func (r *Runtime) writeSecret(ctx context.Context, name string, data map[string][]byte) error {
	s := &corev1.Secret{}
	s.Namespace, s.Name = r.opts.Namespace, name
	s.Labels = mapping.ObjectLabels(r.opts.PoolName, name)
	s.Type = corev1.SecretTypeOpaque
	s.Data = data
	err := r.opts.Client.Update(ctx, s)
	if apierrors.IsNotFound(err) {
		err = r.opts.Client.Create(ctx, s)
	}
	if err != nil {
		return err
	}
	r.observeData(name, data)
	return nil
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
