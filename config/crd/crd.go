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

//go:embed bases/*.yaml capi/*.yaml
var files embed.FS

// Load returns every CRD in bases/ (anvil's own kinds), sorted by name so installs happen in
// a stable order.
func Load() ([]*apiextv1.CustomResourceDefinition, error) {
	return Read(files, "bases/*.yaml")
}

// LoadClusterAPIProvider returns the CRDs of anvil's Cluster API infrastructure provider
// (capi/: infrastructure.cluster.x-k8s.io), sorted by name. They are kept apart from Load's
// because they only mean something beside Cluster API's own CRDs: a cluster without Cluster
// API is not given them.
func LoadClusterAPIProvider() ([]*apiextv1.CustomResourceDefinition, error) {
	return Read(files, "capi/*.yaml")
}

// Read returns the CRDs in the files of fsys that match pattern (kustomization.yaml left
// out), sorted by name: Load's from the binary, and Cluster API's from the copies `make
// tools` puts into bin/capi (internal/clusterapi).
func Read(fsys fs.FS, pattern string) ([]*apiextv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var crds []*apiextv1.CustomResourceDefinition
	for _, f := range names {
		if path.Base(f) == manifest.KustomizationFile {
			continue
		}
		raw, err := fs.ReadFile(fsys, f)
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
			if crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: %s %s is not a CustomResourceDefinition", path.Base(f), crd.Kind, crd.Name)
			}
			crds = append(crds, crd)
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}

// Install creates each of Load's CRDs or updates it to the embedded schema, then waits until
// the apiserver reports every one Established, so callers can use the kinds at once.
func Install(ctx context.Context, c client.Client) error {
	crds, err := Load()
	if err != nil {
		return err
	}
	return Apply(ctx, c, crds)
}

// InstallClusterAPIProvider installs LoadClusterAPIProvider's CRDs the way Install does.
func InstallClusterAPIProvider(ctx context.Context, c client.Client) error {
	crds, err := LoadClusterAPIProvider()
	if err != nil {
		return err
	}
	return Apply(ctx, c, crds)
}

// Apply creates each of crds or updates it to the given schema (manifest.Apply), then waits
// until the apiserver reports every one Established. Install uses it for anvil's CRDs;
// internal/clusterapi for the Cluster API CRDs it reads from `make tools`' copies.
func Apply(ctx context.Context, c client.Client, crds []*apiextv1.CustomResourceDefinition) error {
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
