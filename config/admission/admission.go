package admission

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/anvil-dev/anvil/internal/manifest"
)

//go:embed *.yaml
var files embed.FS

// Load returns the policies and their bindings, in file order (a policy before its
// binding).
func Load() ([]client.Object, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var objs []client.Object
	for _, f := range names {
		if path.Base(f) == manifest.KustomizationFile {
			continue
		}
		raw, err := files.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := manifest.Documents(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(f), err)
		}
		for _, doc := range docs {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Base(f), err)
			}
			var obj client.Object
			switch u.GetKind() {
			case "ValidatingAdmissionPolicy":
				obj = &admissionv1.ValidatingAdmissionPolicy{}
			case "ValidatingAdmissionPolicyBinding":
				obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
			default:
				return nil, fmt.Errorf("%s: unexpected kind %q", path.Base(f), u.GetKind())
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Base(f), err)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// Install creates each policy and binding or updates it to the embedded one. The API
// server compiles a policy's expressions when it is written, so a syntax error fails here;
// a policy takes effect a moment later, once the admission plugin has seen it. (Type
// warnings are reported in the policy's status by kube-controller-manager, which anvil
// dev does not run.)
func Install(ctx context.Context, c client.Client) error {
	objs, err := Load()
	if err != nil {
		return err
	}
	for _, want := range objs {
		if err := manifest.Apply(ctx, c, want); err != nil {
			return fmt.Errorf("installing %T %s: %w", want, want.GetName(), err)
		}
	}
	return nil
}
