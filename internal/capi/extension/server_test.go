package extension

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/inplace"
	capicontroller "github.com/anvil-dev/anvil/internal/controller/capi"
)

// served is the extension running on 127.0.0.1 with a serving certificate
// EnsureServingCert made, trusting clientCA's client certificates.
type served struct {
	url      string
	caBundle []byte
	clientCA testCA
}

// serve runs the extension reading through c (nil: a test that reads nothing), with the
// provider's own Computes finding anvil Machines.
func serve(t *testing.T, c client.Client) *served {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, "capi-client-ca")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{BindAddress: ln.Addr().String(), CertDir: dir, ClientCAFile: ca.write(t, dir)}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := EnsureServingCert(o.CertDir, o.BindAddress); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		srv := &Server{Reader: c, Machines: &capicontroller.Computes{Local: capicontroller.Compute{Client: c, Reader: c}}, Log: logr.Discard()}
		done <- Serve(ctx, ln, cfg, srv.Handler(), testr.New(t))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	caBundle, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	return &served{url: "https://" + o.BindAddress, caBundle: caBundle, clientCA: ca}
}

// client calls the extension as Cluster API does: it verifies the serving certificate with
// the caBundle for the URL's host (127.0.0.1, an IP SAN) and presents cert, if any.
func (s *served) client(t *testing.T, cert *tls.Certificate) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.caBundle) {
		t.Fatal("the serving certificate's tls.crt holds no certificate")
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Sent whatever CAs the server names, so that the server's own check is tested.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// capi is a client holding a client certificate the extension's CA signed.
func (s *served) capi(t *testing.T) *http.Client {
	cert := s.clientCA.issue(t, "capi-manager", x509.ExtKeyUsageClientAuth)
	return s.client(t, &cert)
}

// post sends body to the hook's path and returns the HTTP status and the decoded answer.
func post(t *testing.T, c *http.Client, url, body string, into any) int {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("POST %s: the answer %q is not JSON: %v", url, raw, err)
	}
	return resp.StatusCode
}

func hookURL(s *served, hook, name string) string { return s.url + path(hook, name) }

func TestOnlyClientsWithACertificateOfTheCAAreServed(t *testing.T) {
	s := serve(t, nil)
	discovery := hookURL(s, hookDiscovery, "")
	body := `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`
	other := newTestCA(t, "another-ca")
	otherCert := other.issue(t, "capi-manager", x509.ExtKeyUsageClientAuth)
	serverCert := s.clientCA.issue(t, "a-serving-certificate", x509.ExtKeyUsageServerAuth)
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
	}{
		{"no client certificate", nil},
		{"a client certificate of another CA", &otherCert},
		{"a certificate of the CA that is not for clients", &serverCert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.client(t, tc.cert).Post(discovery, "application/json", strings.NewReader(body))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("the extension answered %s to a caller with %s", resp.Status, tc.name)
			}
			t.Logf("refused: %v", err)
		})
	}
	var got runtimehooksv1.DiscoveryResponse
	if code := post(t, s.capi(t), discovery, body, &got); code != http.StatusOK || got.Status != runtimehooksv1.ResponseStatusSuccess {
		t.Fatalf("Cluster API's certificate: HTTP %d, %+v", code, got)
	}
	// Plain HTTP gets no hook either.
	resp, err := http.Post("http://"+strings.TrimPrefix(discovery, "https://"), "application/json", strings.NewReader(body))
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the extension answered plain HTTP")
		}
	}
}

func TestDiscoveryNamesEveryHandler(t *testing.T) {
	s := serve(t, nil)
	c := s.capi(t)
	var got runtimehooksv1.DiscoveryResponse
	post(t, c, hookURL(s, hookDiscovery, ""), `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"DiscoveryRequest"}`, &got)
	if got.Status != runtimehooksv1.ResponseStatusSuccess || got.Kind != "DiscoveryResponse" {
		t.Fatalf("discovery: %+v", got)
	}
	want := map[string]string{HandlerCanUpdateMachine: "CanUpdateMachine", HandlerCanUpdateMachineSet: "CanUpdateMachineSet", HandlerUpdateMachine: "UpdateMachine"}
	if len(got.Handlers) != len(want) {
		t.Fatalf("handlers %+v, want %v", got.Handlers, want)
	}
	for _, h := range got.Handlers {
		if want[h.Name] != h.RequestHook.Hook || h.RequestHook.APIVersion != runtimehooksv1.GroupVersion.String() {
			t.Errorf("handler %+v, want hook %s", h, want[h.Name])
		}
		// Cluster API's own checks of a discovery answer (internal/runtime/client).
		if errs := validation.IsDNS1123Label(h.Name); len(errs) > 0 || strings.Contains(h.Name, ".") {
			t.Errorf("handler name %q: %v", h.Name, errs)
		}
		if h.TimeoutSeconds == nil || *h.TimeoutSeconds <= 0 || *h.TimeoutSeconds > 30 || h.FailurePolicy == nil || *h.FailurePolicy != runtimehooksv1.FailurePolicyFail {
			t.Errorf("handler %s: timeout %v, failure policy %v", h.Name, h.TimeoutSeconds, h.FailurePolicy)
		}
		// Cluster API calls <url>/hooks.runtime.cluster.x-k8s.io/v1alpha1/<hook>/<name>, lower case.
		var resp runtimehooksv1.CommonResponse
		code := post(t, c, s.url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/"+strings.ToLower(h.RequestHook.Hook)+"/"+h.Name,
			fmt.Sprintf(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"%sRequest"}`, h.RequestHook.Hook), &resp)
		if code != http.StatusOK {
			t.Errorf("handler %s is not served where Cluster API calls it: HTTP %d %+v", h.Name, code, resp)
		}
	}
}

// TestMalformedRequestsGetAFailure: anything Cluster API (or anyone with its certificate)
// sends that is not a request the extension can read gets a Failure naming what is wrong,
// and the server goes on serving.
func TestMalformedRequestsGetAFailure(t *testing.T) {
	s := serve(t, nil)
	c := s.capi(t)
	gv := `"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1"`
	am := `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"AnvilMachine","metadata":{"name":"m","namespace":"ns"},"spec":{"image":"r/os:1","machineClassRef":{"name":"small"}}}`
	for _, tc := range []struct {
		name, hook, handler, body, msg string
		code                           int
	}{
		{"an empty body", hookCanUpdateMachine, HandlerCanUpdateMachine, ``, "not JSON", 200},
		{"not JSON", hookCanUpdateMachineSet, HandlerCanUpdateMachineSet, `{"apiVersion":`, "not JSON", 200},
		{"a JSON array", hookUpdateMachine, HandlerUpdateMachine, `[1,2]`, "not JSON", 200},
		{"no kind", hookUpdateMachine, HandlerUpdateMachine, `{}`, "must have apiVersion hooks.runtime.cluster.x-k8s.io/v1alpha1 and kind UpdateMachineRequest", 200},
		{"another hook's request", hookCanUpdateMachine, HandlerCanUpdateMachine, `{` + gv + `,"kind":"UpdateMachineRequest"}`, "kind CanUpdateMachineRequest", 200},
		{"a request without the machine", hookCanUpdateMachine, HandlerCanUpdateMachine, `{` + gv + `,"kind":"CanUpdateMachineRequest"}`, "no current.infrastructureMachine", 200},
		{"a field of the wrong type", hookCanUpdateMachine, HandlerCanUpdateMachine, `{` + gv + `,"kind":"CanUpdateMachineRequest","current":{"machine":"x"}}`, "reading the CanUpdateMachine request", 200},
		{"an infrastructure machine that is a string", hookCanUpdateMachine, HandlerCanUpdateMachine,
			`{` + gv + `,"kind":"CanUpdateMachineRequest","current":{"infrastructureMachine":"x"},"desired":{"infrastructureMachine":"x"}}`, "current.infrastructureMachine is not a JSON object", 200},
		{"an AnvilMachine whose image is a number", hookCanUpdateMachine, HandlerCanUpdateMachine,
			`{` + gv + `,"kind":"CanUpdateMachineRequest","current":{"infrastructureMachine":` + am + `},"desired":{"infrastructureMachine":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"AnvilMachine","spec":{"image":7}}}}`,
			"desired.infrastructureMachine is not a valid AnvilMachine", 200},
		{"an UpdateMachine of another provider's machine", hookUpdateMachine, HandlerUpdateMachine,
			`{` + gv + `,"kind":"UpdateMachineRequest","desired":{"infrastructureMachine":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"Metal3Machine"}}}`, "not an AnvilMachine", 200},
		{"an UpdateMachine of an AnvilMachine without a name", hookUpdateMachine, HandlerUpdateMachine,
			`{` + gv + `,"kind":"UpdateMachineRequest","desired":{"infrastructureMachine":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"AnvilMachine","spec":{"image":"r/os:2"}}}}`, "no name or namespace", 200},
		{"a body over the limit", hookCanUpdateMachine, HandlerCanUpdateMachine, `{"a":"` + strings.Repeat("x", maxRequestBytes) + `"}`, "reading the CanUpdateMachine request", 200},
		{"an unknown hook", "BeforeClusterCreate", "x", `{}`, "serves no hook at /hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclustercreate/x", 404},
		{"an unknown handler name", hookUpdateMachine, "update-machine-2", `{}`, "serves no hook", 404},
		{"another path", "", "", `{}`, "serves no hook at /", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := s.url + "/"
			if tc.hook != "" {
				url = hookURL(s, tc.hook, tc.handler)
			}
			var got runtimehooksv1.CommonResponse
			code := post(t, c, url, tc.body, &got)
			if code != tc.code || got.Status != runtimehooksv1.ResponseStatusFailure || !strings.Contains(got.Message, tc.msg) {
				t.Fatalf("HTTP %d %+v, want %d, a Failure saying %q", code, got, tc.code, tc.msg)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodGet, hookURL(s, hookDiscovery, ""), nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if raw, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusMethodNotAllowed || !bytes.Contains(raw, []byte(`"status":"Failure"`)) {
		t.Fatalf("GET: HTTP %d %s, want 405 and a Failure", resp.StatusCode, raw)
	}
}

// raw is obj as Cluster API puts it into a request.
func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func amSpec(image, class string) infrav1.AnvilMachineSpec {
	return infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class}, Image: image,
		Architecture: computev1alpha1.ArchitectureARM64, MachinePoolSelector: map[string]string{"kind": "vm"}}
}

func anvilTemplate(name string, s infrav1.AnvilMachineSpec) *infrav1.AnvilMachineTemplate {
	return &infrav1.AnvilMachineTemplate{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilMachineTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"},
		Spec:       infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{Spec: s}}}
}

func anvilMachineObj(name string, s infrav1.AnvilMachineSpec) *infrav1.AnvilMachine {
	return &infrav1.AnvilMachine{TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}, Spec: s}
}

// matches applies p to current as Cluster API does (the whole object, then only the spec
// at specPath compared) and says whether it then equals desired there.
func matches(t *testing.T, p runtimehooksv1.Patch, current, desired runtime.RawExtension, specPath ...string) bool {
	t.Helper()
	out := current.Raw
	if p.IsDefined() {
		decoded, err := jsonpatch.DecodePatch(p.Patch)
		if err != nil {
			t.Fatalf("patch %s: %v", p.Patch, err)
		}
		if out, err = decoded.Apply(current.Raw); err != nil {
			t.Fatalf("patch %s does not apply: %v", p.Patch, err)
		}
	}
	at := func(b []byte) any {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		for _, k := range specPath {
			v = v.(map[string]any)[k]
		}
		return v
	}
	a, _ := json.Marshal(at(out))
	b, _ := json.Marshal(at(desired.Raw))
	return bytes.Equal(a, b)
}

func TestCanUpdateMachineSetCoversANewImageOnly(t *testing.T) {
	s := serve(t, nil)
	c := s.capi(t)
	ms := clusterv1.MachineSet{TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "md-0-abc", Namespace: "tenant"},
		Spec: clusterv1.MachineSetSpec{ClusterName: "c1", Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.36.3",
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachineTemplate", Name: "t-1"}}}}}
	for _, tc := range []struct {
		name             string
		current, desired any
		inPlace          bool
		msg              string
	}{
		{"a new image", anvilTemplate("t-1", amSpec("r/os:1", "small")), anvilTemplate("t-2", amSpec("r/os:2", "small")), true, "reimages in place from r/os:1 to r/os:2"},
		{"a new image and class", anvilTemplate("t-1", amSpec("r/os:1", "small")), anvilTemplate("t-2", amSpec("r/os:2", "large")), false, "reimages in place"},
		{"a new class", anvilTemplate("t-1", amSpec("r/os:1", "small")), anvilTemplate("t-2", amSpec("r/os:1", "large")), false, "no change anvil applies in place"},
		{"another provider's template", map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3MachineTemplate", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{"image": "a"}}}},
			map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3MachineTemplate", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{"image": "b"}}}}, false, "is not an AnvilMachineTemplate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := runtimehooksv1.CanUpdateMachineSetRequest{
				TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "CanUpdateMachineSetRequest"},
				Current:  runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: ms, InfrastructureMachineTemplate: raw(t, tc.current)},
				Desired:  runtimehooksv1.CanUpdateMachineSetRequestObjects{MachineSet: ms, InfrastructureMachineTemplate: raw(t, tc.desired)},
			}
			body, _ := json.Marshal(req)
			var got runtimehooksv1.CanUpdateMachineSetResponse
			post(t, c, hookURL(s, hookCanUpdateMachineSet, HandlerCanUpdateMachineSet), string(body), &got)
			if got.Status != runtimehooksv1.ResponseStatusSuccess || !strings.Contains(got.Message, tc.msg) || got.Kind != "CanUpdateMachineSetResponse" {
				t.Fatalf("answer %+v, want Success saying %q", got, tc.msg)
			}
			if got.MachineSetPatch.IsDefined() || got.BootstrapConfigTemplatePatch.IsDefined() {
				t.Fatalf("the MachineSet or bootstrap template is covered: %+v", got)
			}
			if m := matches(t, got.InfrastructureMachineTemplatePatch, req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate, "spec", "template", "spec"); m != tc.inPlace {
				t.Fatalf("after the patch %s the template matches the desired one: %v, want %v", got.InfrastructureMachineTemplatePatch.Patch, m, tc.inPlace)
			}
		})
	}
}

// KubeadmControlPlane's machines are never reimaged in place (inplace.ControlPlaneKept): a
// new image is answered with why, and KubeadmControlPlane replaces the machine.
func TestCanUpdateMachineCoversNothingOfAControlPlane(t *testing.T) {
	s := serve(t, nil)
	c := s.capi(t)
	machine := clusterv1.Machine{TypeMeta: metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine"},
		ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Namespace: "tenant"}, Spec: clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.36.3"}}
	withID := func(s infrav1.AnvilMachineSpec) infrav1.AnvilMachineSpec {
		s.ProviderID = "anvil://tenant/cp-0"
		return s
	}
	for _, tc := range []struct {
		name             string
		current, desired infrav1.AnvilMachineSpec
		// same: the current AnvilMachine is already the desired one; msg: the answer says.
		same bool
		msg  string
	}{
		{"a new image", withID(amSpec("r/os:1", "small")), withID(amSpec("r/os:2", "small")), false, inplace.ControlPlaneKept},
		{"the same machine", withID(amSpec("r/os:1", "small")), withID(amSpec("r/os:1", "small")), true, "no change anvil applies in place"},
		{"a new image and class", withID(amSpec("r/os:1", "small")), withID(amSpec("r/os:2", "large")), false, inplace.ControlPlaneKept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := runtimehooksv1.CanUpdateMachineRequest{
				TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "CanUpdateMachineRequest"},
				Current:  runtimehooksv1.CanUpdateMachineRequestObjects{Machine: machine, InfrastructureMachine: raw(t, anvilMachineObj("cp-0", tc.current))},
				Desired:  runtimehooksv1.CanUpdateMachineRequestObjects{Machine: machine, InfrastructureMachine: raw(t, anvilMachineObj("cp-0", tc.desired))},
			}
			body, _ := json.Marshal(req)
			var got runtimehooksv1.CanUpdateMachineResponse
			post(t, c, hookURL(s, hookCanUpdateMachine, HandlerCanUpdateMachine), string(body), &got)
			if got.Status != runtimehooksv1.ResponseStatusSuccess || got.MachinePatch.IsDefined() || got.BootstrapConfigPatch.IsDefined() ||
				got.InfrastructureMachinePatch.IsDefined() || !strings.Contains(got.Message, tc.msg) {
				t.Fatalf("answer %+v, want Success, no patch, a message saying %q", got, tc.msg)
			}
			if m := matches(t, got.InfrastructureMachinePatch, req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, "spec"); m != tc.same {
				t.Fatalf("the AnvilMachine matches the desired one: %v, want %v", m, tc.same)
			}
		})
	}
}

func TestUpdateMachineAsksAgainWhenItCannotRead(t *testing.T) {
	// A real client of an apiserver that is not there.
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	unreachable, err := client.New(&rest.Config{Host: "https://" + gone, Timeout: 2 * time.Second}, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, unreachable)
	body, _ := json.Marshal(runtimehooksv1.UpdateMachineRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "UpdateMachineRequest"},
		Desired:  runtimehooksv1.UpdateMachineRequestObjects{InfrastructureMachine: raw(t, anvilMachineObj("m-0", amSpec("r/os:2", "small")))},
	})
	var got runtimehooksv1.UpdateMachineResponse
	post(t, s.capi(t), hookURL(s, hookUpdateMachine, HandlerUpdateMachine), string(body), &got)
	if got.Status != runtimehooksv1.ResponseStatusSuccess || got.RetryAfterSeconds <= 0 || !strings.Contains(got.Message, "connection refused") {
		t.Fatalf("answer %+v, want in progress with the read error", got)
	}
}
