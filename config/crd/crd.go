package crd

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/anvil-dev/anvil/internal/manifest"
)

//go:embed bases/*.yaml
var bases embed.FS

// Load returns every CRD in bases/, sorted by name so installs happen in a stable order.
func Load() ([]*apiextv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var crds []*apiextv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := manifest.Documents(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(f), err)
		}
		for _, doc := range docs {
			crd := &apiextv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Base(f), err)
			}
			crds = append(crds, crd)
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}

// Install creates each CRD or updates it to the embedded schema, then waits until the
// apiserver reports every one Established, so callers can use the kinds at once.
func Install(ctx context.Context, c client.Client) error {
	crds, err := Load()
	if err != nil {
		return err
	}
	for _, want := range crds {
		if err := manifest.Apply(ctx, c, want); err != nil {
			return fmt.Errorf("installing CRD %s: %w", want.Name, err)
		}
	}
	for _, want := range crds {
		if err := waitEstablished(ctx, c, want.Name); err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", want.Name, err)
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
