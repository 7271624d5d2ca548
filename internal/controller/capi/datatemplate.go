package capi

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/datatemplate"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvildatatemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=anvildatatemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.anvil.dev,resources=hardwaredata,verbs=get;list;watch

// rendered is what an AnvilMachine's data template gives its anvil Machine; Refusal, when
// set, is the Ready condition saying why it cannot be rendered (no anvil Machine is made).
type rendered struct {
	Hostname string
	MetaData map[string]string
	Refusal  *metav1.Condition
}

// renderDataTemplate gives the AnvilMachine its index in its data template (recorded in the
// template's status before it is used, so no two machines ever get one index) and renders
// the template for it. hardware is the HardwareData of its server, if known.
func (r *AnvilMachineReconciler) renderDataTemplate(ctx context.Context, compute Compute, am *infrav1.AnvilMachine, clusterName, namespace string) (rendered, error) {
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
	in := datatemplate.Input{ClusterName: clusterName, MachineName: am.Name, Index: indexes[am.Name]}
	hw := &metalv1alpha1.HardwareData{}
	// The tenant's own copy, named after its Machine; a VM has none, and an identity for
	// another anvil may not read it.
	if ok, err := getOptional(ctx, compute.Reader, client.ObjectKey{Namespace: namespace, Name: am.Name}, hw); ignoreForbidden(err) != nil {
		return rendered{}, err
	} else if ok {
		in.Hardware = &hw.Spec
	}
	out, err := datatemplate.Render(&t.Spec, in)
	if err != nil {
		return refusal(infrav1.ReasonDataTemplateInvalid, fmt.Sprintf("AnvilDataTemplate %s: %v", ref.Name, err)), nil
	}
	return rendered{Hostname: out.Hostname, MetaData: out.MetaData}, nil
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
