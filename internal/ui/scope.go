package ui

import (
	"context"
	"fmt"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/ui/view"
)

// resource is one kind the UI watches, as the API serves it.
type resource struct {
	kind       view.Kind
	group      string
	version    string
	resource   string
	namespaced bool
}

// resources are every kind the pages show, in the order the scope is decided.
var resources = []resource{
	{view.KindPool, computev1alpha1.GroupVersion.Group, computev1alpha1.GroupVersion.Version, "machinepools", false},
	{view.KindMachine, computev1alpha1.GroupVersion.Group, computev1alpha1.GroupVersion.Version, "machines", true},
	{view.KindHost, metalv1alpha1.GroupVersion.Group, metalv1alpha1.GroupVersion.Version, "hosts", true},
	{view.KindImage, imagesv1alpha1.GroupVersion.Group, imagesv1alpha1.GroupVersion.Version, "osimages", true},
	{view.KindBuild, imagesv1alpha1.GroupVersion.Group, imagesv1alpha1.GroupVersion.Version, "osimagebuilds", true},
	{view.KindCluster, "cluster.x-k8s.io", "v1beta2", "clusters", true},
}

// Access is where the user may watch one kind.
type Access struct {
	// All: every namespace (or the kind is cluster-scoped).
	All bool `json:"all"`
	// Namespaces, when not All: those it may watch it in.
	Namespaces []string `json:"namespaces,omitempty"`
	// Why, when it may watch it nowhere: the API does not serve it, or the user may not.
	Why string `json:"why,omitempty"`
}

// Watched says whether the kind is watched anywhere.
func (a Access) Watched() bool { return a.All || len(a.Namespaces) > 0 }

// Scope is what the UI watches for its user: each kind, and where.
type Scope map[view.Kind]Access

// DecideScope asks the API server what the user may list and watch: each kind everywhere
// when it may, else in each of namespaces it may. A kind the API server does not serve (the
// metal or Cluster API CRDs not installed) is not watched.
func DecideScope(ctx context.Context, cs kubernetes.Interface, namespaces []string) (Scope, error) {
	scope := Scope{}
	discovered := map[string]*metav1.APIResourceList{} // one discovery read a group version
	for _, r := range resources {
		served, err := serves(cs.Discovery(), discovered, r)
		if err != nil {
			return nil, err
		}
		if !served {
			scope[r.kind] = Access{Why: fmt.Sprintf("the API server does not serve %s.%s", r.resource, r.group)}
			continue
		}
		all, err := mayWatch(ctx, cs, r, "")
		if err != nil {
			return nil, err
		}
		if all || !r.namespaced {
			scope[r.kind] = Access{All: all, Why: whyNot(all, r, nil)}
			continue
		}
		var in []string
		for _, ns := range namespaces {
			ok, err := mayWatch(ctx, cs, r, ns)
			if err != nil {
				return nil, err
			}
			if ok && !slices.Contains(in, ns) {
				in = append(in, ns)
			}
		}
		scope[r.kind] = Access{Namespaces: in, Why: whyNot(len(in) > 0, r, namespaces)}
	}
	return scope, nil
}

func whyNot(ok bool, r resource, namespaces []string) string {
	switch {
	case ok:
		return ""
	case !r.namespaced:
		return "you may not list and watch " + r.resource + "." + r.group
	default:
		return fmt.Sprintf("you may not list and watch %s.%s in all namespaces, nor in %v", r.resource, r.group, namespaces)
	}
}

// serves says whether the API server serves r, reading each group version once into read.
func serves(d discovery.DiscoveryInterface, read map[string]*metav1.APIResourceList, r resource) (bool, error) {
	gv := r.group + "/" + r.version
	list, ok := read[gv]
	if !ok {
		var err error
		list, err = d.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			list, err = &metav1.APIResourceList{}, nil
		}
		if err != nil {
			return false, fmt.Errorf("discovering %s: %w", gv, err)
		}
		read[gv] = list
	}
	return slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r.resource }), nil
}

// mayWatch asks whether the user may list and watch r in namespace ("" for all).
func mayWatch(ctx context.Context, cs kubernetes.Interface, r resource, namespace string) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: r.group, Version: r.version, Resource: r.resource}}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether you may %s %s: %w", verb, r.resource, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
