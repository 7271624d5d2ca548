package capi

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/datatemplate"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvildatatemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvildatatemplates/status,verbs=get;update;patch

// rendered is what an AnvilMachine's data template gives its anvil Machine; Refusal, when
// set, is the Ready condition saying why it cannot be rendered (no anvil Machine is made).
type rendered struct {
	datatemplate.Rendered
	Refusal *metav1.Condition
}

// renderDataTemplate gives the AnvilMachine its index in its data template (recorded in the
// template's status before it is used, so no two machines ever get one index) and renders
// the template for it. Its hardware keys stay references: the runtime that places the
// anvil Machine resolves them into its first boot, so nothing here reads a server.
func (r *AnvilMachineReconciler) renderDataTemplate(ctx context.Context, am *infrav1.AnvilMachine, clusterName string) (rendered, error) {
	ref := am.Spec.DataTemplateRef
	if ref == nil {
		return rendered{}, nil
	}
	t := &infrav1.AnvilDataTemplate{}
	ok, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: am.Namespace, Name: ref.Name}, t)
	if err != nil {
		return rendered{}, err
	}
	if !ok {
		return refusal(infrav1.ReasonDataTemplateNotFound, fmt.Sprintf("AnvilDataTemplate %s/%s not found", am.Namespace, ref.Name)), nil
	}
	indexes := datatemplate.Allocate(t.Status.Indexes, am.Name)
	if _, had := t.Status.Indexes[am.Name]; !had {
		// Written with the resourceVersion read: a writer that lost a race re-reads.
		t.Status.Indexes = indexes
		if err := r.Client.Status().Update(ctx, t); err != nil {
			return rendered{}, err
		}
	}
	out, err := datatemplate.Render(&t.Spec, datatemplate.Input{ClusterName: clusterName, MachineName: am.Name, Index: indexes[am.Name]})
	if err != nil {
		return refusal(infrav1.ReasonDataTemplateInvalid, fmt.Sprintf("AnvilDataTemplate %s: %v", ref.Name, err)), nil
	}
	return rendered{Rendered: out}, nil
}

// releaseIndex frees a deleted AnvilMachine's index in its data template.
func (r *AnvilMachineReconciler) releaseIndex(ctx context.Context, am *infrav1.AnvilMachine) error {
	if am.Spec.DataTemplateRef == nil {
		return nil
	}
	t := &infrav1.AnvilDataTemplate{}
	if ok, err := getOptional(ctx, r.Client, client.ObjectKey{Namespace: am.Namespace, Name: am.Spec.DataTemplateRef.Name}, t); !ok {
		return err
	}
	if _, held := t.Status.Indexes[am.Name]; !held {
		return nil
	}
	t.Status.Indexes = datatemplate.Release(t.Status.Indexes, am.Name)
	return r.Client.Status().Update(ctx, t)
}

func refusal(reason, msg string) rendered {
	return rendered{Refusal: &metav1.Condition{Type: infrav1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
}
