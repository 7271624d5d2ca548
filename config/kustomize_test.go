package config

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/manifest"
	"github.com/anvil-dev/anvil/test/harness"
)

// kustomize renders config/<dir> with the kubectl of bin/ (its built-in kustomize, the one
// kubectl apply -k uses).
func kustomize(t *testing.T, kubectl, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderrOf(err))
	}
	docs, err := manifest.Documents(out)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(mustJSON(t, d)); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

func key(o client.Object) string {
	return fmt.Sprintf("%s %s/%s", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName())
}

func keys[T client.Object](objs []T) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	sort.Strings(ks)
	return ks
}

// missing is what of want is not in have.
func missing(have, want []string) []string {
	var m []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			m = append(m, w)
		}
	}
	return m
}

// What kubectl apply -k installs is what anvil dev and the tests install from the embedded
// files: every CRD, policy and shipped role, and the overlays' folders add theirs.
func TestKustomizationsShipTheEmbeddedManifests(t *testing.T) {
	kubectl := tool(t, "kubectl")
	def := keys(kustomize(t, kubectl, "default"))
	crds, err := crd.Load()
	if err != nil {
		t.Fatal(err)
	}
	policies, err := admission.Load()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range crds {
		c.Kind = "CustomResourceDefinition"
		want = append(want, key(c))
	}
	want = append(want, keys(policies)...)
	for _, dir := range []string{"", "poollet", "nodepoollet", "tenant"} {
		roles, err := rbac.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, keys(roles)...)
	}
	if m := missing(def, want); len(m) > 0 {
		t.Errorf("config/default lacks what the embedded manifests hold: %v (list new files in the folder's kustomization.yaml)", m)
	}
	capiCRDs, err := crd.LoadClusterAPIProvider()
	if err != nil {
		t.Fatal(err)
	}
	want = nil
	for _, dir := range []string{"capi", "capiprovider"} {
		roles, err := rbac.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, keys(roles)...)
	}
	for _, c := range capiCRDs {
		c.Kind = "CustomResourceDefinition"
		want = append(want, key(c))
	}
	if m := missing(keys(kustomize(t, kubectl, "capi")), want); len(m) > 0 {
		t.Errorf("config/capi lacks %v", m)
	}
	metalRoles, err := rbac.Load("metal")
	if err != nil {
		t.Fatal(err)
	}
	if m := missing(keys(kustomize(t, kubectl, "metal-site")), keys(metalRoles)); len(m) > 0 {
		t.Errorf("config/metal-site lacks %v", m)
	}
	for _, dir := range []string{"default", "metal-site", "capi"} {
		for _, o := range kustomize(t, kubectl, dir) {
			for _, c := range containers(t, o) {
				if !slices.Contains(Images, c) {
					t.Errorf("config/%s: %s names image %q; use one of %v so an overlay's images: sets it", dir, key(o), c, Images)
				}
			}
		}
	}
}

// containers are the images of o's Pod template, if it has one.
func containers(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	list, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil || !found {
		return nil
	}
	var imgs []string
	for _, c := range list {
		img, _, _ := unstructured.NestedString(c.(map[string]any), "image")
		imgs = append(imgs, img)
	}
	return imgs
}

// The API server takes every object of the three kustomizations (a server-side dry run,
// its admission and validation included), and kubectl delete -k takes them all back.
func TestKustomizationsApplyToARealAPIServer(t *testing.T) {
	kubectl := tool(t, "kubectl")
	kubeconfig := harness.StartAPIServer(t)
	run := kubectlOn(t, kubectl, kubeconfig)
	// A dry run cannot create a namespace for the objects after it: the namespaces first.
	for _, ns := range []string{"anvil-system", "anvil-pool-leases", "anvil-metal"} {
		run("create", "namespace", ns)
	}
	for _, dir := range []string{"default", "metal-site", "capi"} {
		out := run("apply", "--dry-run=server", "-k", dir)
		if n := strings.Count(out, "(server dry run)"); n != len(kustomize(t, kubectl, dir)) {
			t.Errorf("kubectl apply --dry-run=server -k config/%s: %d objects accepted of %d:\n%s", dir, n, len(kustomize(t, kubectl, dir)), out)
		}
	}
	for _, dir := range []string{"default", "metal-site", "capi"} {
		run("apply", "-k", dir)
	}
	if out := run("get", "deployment", "-A", "-o", "name"); !strings.Contains(out, "anvil-controller-manager") || !strings.Contains(out, "anvil-metal-site") || !strings.Contains(out, "anvil-capi-provider") {
		t.Errorf("after apply -k, the Deployments are %q", out)
	}
	// A CRD deleted while its storage still initializes keeps failing to list its instances
	// (InstanceDeletionFailed, "storage is (re)initializing") and never goes: list each
	// kind once first, as anything using them would have.
	run("wait", "--for=condition=Established", "crd", "--all")
	var kinds []string
	for _, l := range strings.Fields(run("get", "crd", "-o", "name")) {
		kinds = append(kinds, strings.TrimPrefix(l, "customresourcedefinition.apiextensions.k8s.io/"))
	}
	run("get", strings.Join(kinds, ","), "-A")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dir := range []string{"capi", "metal-site", "default"} {
		run("delete", "--wait=false", "-k", dir)
	}
	var left []string
	for ; ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		left = left[:0]
		for _, l := range strings.Fields(run("get", "crd,daemonset,deployment,validatingadmissionpolicy,validatingadmissionpolicybinding,clusterrole,clusterrolebinding", "-A", "-o", "name")) {
			if strings.Contains(l, "anvil") {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("kubectl delete -k left %v", left)
	}
	// No namespace controller runs beside this API server: a deleted namespace stays
	// Terminating, which is all delete -k can do.
	if out := run("get", "namespace", "anvil-system", "anvil-pool-leases", "anvil-metal", "-o", "jsonpath={.items[*].status.phase}"); out != "Terminating Terminating Terminating" {
		t.Errorf("after delete -k the namespaces are %q, want all Terminating", out)
	}
}

// tool is bin/<name> (KUBEBUILDER_ASSETS or the checkout's bin/), failing when missing.
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run make tools (%v)", name, err)
	}
	return p
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func mustJSON(t *testing.T, doc []byte) []byte {
	t.Helper()
	j, err := yamlToJSON(bytes.TrimSpace(doc))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

var yamlToJSON = yaml.YAMLToJSON

// An overlay puts every image where it says, by digest or tag, and adds arguments to the
// containers it names.
func TestOverlaySetsImagesAndArgs(t *testing.T) {
	kubectl := tool(t, "kubectl")
	dir := filepath.Join(t.TempDir(), "site")
	base, err := filepath.Abs("default")
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	o := Overlay{Bases: []string{base},
		Images: map[string]string{"anvil": "registry.example/anvil/anvil@" + digest, "anvil-qemu": "registry.example/anvil/anvil-qemu:v1", "anvil-metal": "registry.example/anvil/anvil-metal:v1"},
		Args:   map[string][]string{"DaemonSet/anvil-qemu-runtime/0": {"--allow-registry=10.0.0.0/8"}}}
	if err := o.Write(dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range kustomize(t, kubectl, dir) {
		got = append(got, containers(t, obj)...)
		if obj.GetName() == "anvil-qemu-runtime" {
			args, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			if a := fmt.Sprint(args[0].(map[string]any)["args"]); !strings.Contains(a, "--allow-registry=10.0.0.0/8") {
				t.Errorf("the runtime's args are %s, want the overlay's added", a)
			}
		}
	}
	slices.Sort(got)
	want := []string{"registry.example/anvil/anvil-qemu:v1", "registry.example/anvil/anvil@" + digest, "registry.example/anvil/anvil@" + digest}
	if !slices.Equal(slices.Compact(got), slices.Compact(want)) {
		t.Errorf("images after the overlay: %v, want %v", got, want)
	}
	if err := (Overlay{Bases: []string{base}, Images: map[string]string{"anvil": "x"}}).Write(dir); err == nil {
		t.Error("an overlay missing images was written")
	}
}

// argOf is the value of --NAME=VALUE among a container's args ("" when missing).
func argOf(t *testing.T, o *unstructured.Unstructured, container, name string) string {
	t.Helper()
	list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range list {
		m := c.(map[string]any)
		if m["name"] != container {
			continue
		}
		args, _, _ := unstructured.NestedStringSlice(m, "args")
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// A runtime names the pool it serves and its poollet refuses any other (MRI rule I5):
// each shipped runtime's --pool is its poollet's --pool.
func TestRuntimesServeTheirPoolletsPool(t *testing.T) {
	kubectl := tool(t, "kubectl")
	find := func(dir, name string) *unstructured.Unstructured {
		for _, o := range kustomize(t, kubectl, dir) {
			if o.GetName() == name && (o.GetKind() == "DaemonSet" || o.GetKind() == "Deployment") {
				return o
			}
		}
		t.Fatalf("config/%s has no workload %s", dir, name)
		return nil
	}
	for _, p := range []struct{ dir, runtime, runtimeContainer, poollet string }{
		{"default", "anvil-qemu-runtime", "runtime", "anvil-qemu-poollet"},
		{"metal-site", "anvil-metal-site", "site", "anvil-metal-site"},
	} {
		name := argOf(t, find(p.dir, p.runtime), p.runtimeContainer, "pool")
		pool := argOf(t, find(p.dir, p.poollet), "poollet", "pool")
		if name == "" || name != pool {
			t.Errorf("config/%s: runtime %s serves pool %q, its poollet is for %q", p.dir, p.runtime, name, pool)
		}
	}
}

// kubectlOn runs kubectl against kubeconfig, failing the test on an error with its output.
func kubectlOn(t *testing.T, kubectl, kubeconfig string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
