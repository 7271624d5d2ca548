package manifest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Documents returns the non-empty documents of a multi-document YAML stream.
func Documents(raw []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// stripComments drops whole-line comments so a document of only comments counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// ReadDir decodes every object in the *.yaml and *.yml files of dir, files in name order.
func ReadDir(dir string) ([]*unstructured.Unstructured, error) {
	return ReadFS(os.DirFS(dir), ".")
}

// KustomizationFile is the name of the kustomization in each folder of config/; ReadFS
// leaves it out.
const KustomizationFile = "kustomization.yaml"

// ReadFS is ReadDir for the folder dir of fsys (an embedded one, for manifests a binary
// ships).
func ReadFS(fsys fs.FS, dir string) ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		// kustomization.yaml is kustomize's own file beside the objects (kubectl apply -k), not one.
		if !e.IsDir() && e.Name() != KustomizationFile && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		docs, err := Documents(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, doc := range docs {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
			}
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", name, i+1)
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// CreateMissing creates each object that does not exist yet and reports how many it
// created. An object that exists is left as it is.
func CreateMissing(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (int, error) {
	created := 0
	for _, o := range objs {
		err := c.Create(ctx, o.DeepCopy())
		switch {
		case err == nil:
			created++
		case apierrors.IsAlreadyExists(err):
		default:
			return created, fmt.Errorf("creating %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
		}
	}
	return created, nil
}

// Apply makes the object named like want match want: it creates it, or replaces the
// stored one (labels, annotations and spec: everything but status), keeping its
// resourceVersion, finalizers (the API server puts one on every CRD) and owners. A write that raced another is read and tried again. Installers of
// objects anvil ships (CRDs, admission policies) use it, so a new version replaces the
// old one.
func Apply(ctx context.Context, c client.Client, want client.Object) error {
	return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 8},
		func(ctx context.Context) (bool, error) {
			have := want.DeepCopyObject().(client.Object)
			err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
			switch {
			case apierrors.IsNotFound(err):
				err = c.Create(ctx, want.DeepCopyObject().(client.Object))
			case err == nil:
				update := want.DeepCopyObject().(client.Object)
				update.SetResourceVersion(have.GetResourceVersion())
				update.SetFinalizers(have.GetFinalizers())
				update.SetOwnerReferences(have.GetOwnerReferences())
				err = c.Update(ctx, update)
			}
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				return false, nil // someone else wrote it between our read and write: read again
			}
			return err == nil, err
		})
}
