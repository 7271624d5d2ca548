package extension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/inplace"
)

// Handler names, as discovery tells Cluster API. Cluster API records each as
// <handler>.<ExtensionConfig name> and splits on the dot: DNS-1123 labels, no dots.
const (
	HandlerCanUpdateMachine    = "can-update-machine"
	HandlerCanUpdateMachineSet = "can-update-machine-set"
	HandlerUpdateMachine       = "update-machine"
)

// Hook names of Cluster API's catalog.
const (
	hookDiscovery           = "Discovery"
	hookCanUpdateMachine    = "CanUpdateMachine"
	hookCanUpdateMachineSet = "CanUpdateMachineSet"
	hookUpdateMachine       = "UpdateMachine"
)

// timeoutSeconds is the time Cluster API gives each call (at most 30): answers come from
// the cache, in milliseconds.
const timeoutSeconds = 10

// maxRequestBytes bounds a request body: Cluster API sends a few objects' specs.
const maxRequestBytes = 8 << 20

// Server answers Cluster API's in-place update hooks.
type Server struct {
	// Reader reads AnvilMachines: the manager's cached client, whose informers the
	// AnvilMachine controller already runs.
	Reader client.Reader
	// Machines finds their anvil Machines.
	Machines Machines
	Log      logr.Logger
}

// Machines finds the anvil Machine of an AnvilMachine, nil if there is none: in this anvil,
// or in the one its AnvilCluster's identityRef names (the provider's Computes, whose caches
// the controllers use).
type Machines interface {
	AnvilMachineOf(ctx context.Context, am *infrav1.AnvilMachine) (*computev1alpha1.Machine, error)
}

// handler serves one hook: it decodes the body and returns the response to send.
type handler struct {
	name, hook string
	serve      func(ctx context.Context, body []byte) runtimehooksv1.ResponseObject
}

func (s *Server) handlers() []handler {
	return []handler{
		{hook: hookDiscovery, serve: hookFunc(hookDiscovery, newOf[runtimehooksv1.DiscoveryResponse], s.discovery)},
		{name: HandlerCanUpdateMachineSet, hook: hookCanUpdateMachineSet,
			serve: hookFunc(hookCanUpdateMachineSet, newOf[runtimehooksv1.CanUpdateMachineSetResponse], s.canUpdateMachineSet)},
		{name: HandlerCanUpdateMachine, hook: hookCanUpdateMachine,
			serve: hookFunc(hookCanUpdateMachine, newOf[runtimehooksv1.CanUpdateMachineResponse], s.canUpdateMachine)},
		{name: HandlerUpdateMachine, hook: hookUpdateMachine,
			serve: hookFunc(hookUpdateMachine, newOf[runtimehooksv1.UpdateMachineResponse], s.updateMachine)},
	}
}

func newOf[T any]() *T { return new(T) }

// path is where Cluster API calls a handler: the catalog's path for the hook and name.
func path(hook, name string) string {
	return runtimecatalog.GVHToPath(runtimecatalog.GroupVersionHook{
		Group: runtimehooksv1.GroupVersion.Group, Version: runtimehooksv1.GroupVersion.Version, Hook: hook}, name)
}

// Handler routes Cluster API's calls to the hooks. Anything else gets a Failure response
// naming what is served: a 404 for another path, a 405 for a method other than POST.
func (s *Server) Handler() http.Handler {
	routes := map[string]handler{}
	var served []string
	for _, h := range s.handlers() {
		p := path(h.hook, h.name)
		routes[p] = h
		served = append(served, p)
	}
	sort.Strings(served)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := routes[r.URL.Path]
		switch {
		case !ok:
			writeJSON(w, http.StatusNotFound, failure(fmt.Sprintf("anvil's in-place update extension serves no hook at %s; it serves %s", r.URL.Path, strings.Join(served, ", "))))
			return
		case r.Method != http.MethodPost:
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, failure(fmt.Sprintf("%s takes POST, not %s", r.URL.Path, r.Method)))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		var resp runtimehooksv1.ResponseObject
		if err != nil {
			resp = h.serve(r.Context(), nil)
			resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
			resp.SetMessage(fmt.Sprintf("reading the %s request: %v", h.hook, err))
		} else {
			resp = h.serve(r.Context(), body)
		}
		log := s.Log.WithValues("hook", h.hook, "status", resp.GetStatus())
		if resp.GetStatus() == runtimehooksv1.ResponseStatusFailure {
			log.Info("answered with a failure", "message", resp.GetMessage())
		} else {
			log.V(1).Info("answered", "message", resp.GetMessage())
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// failure is the body of an answer that is no hook's.
func failure(msg string) *runtimehooksv1.CommonResponse {
	return &runtimehooksv1.CommonResponse{Status: runtimehooksv1.ResponseStatusFailure, Message: msg}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	raw, err := json.Marshal(v)
	if err != nil { // the hooks' types always marshal
		raw = []byte(`{"status":"Failure","message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(raw)
}

// hookFunc decodes a request of hook's type into Req and answers with serve; a body that is
// not such a request gets a Failure saying why. The response carries its apiVersion and kind.
func hookFunc[Req any, Resp runtimehooksv1.ResponseObject](hook string, newResp func() Resp, serve func(context.Context, *Req, Resp)) func(context.Context, []byte) runtimehooksv1.ResponseObject {
	return func(ctx context.Context, body []byte) runtimehooksv1.ResponseObject {
		resp := newResp()
		resp.GetObjectKind().SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind(hook + "Response"))
		req := new(Req)
		if err := decodeRequest(body, hook, req); err != nil {
			resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
			resp.SetMessage(err.Error())
			return resp
		}
		serve(ctx, req, resp)
		return resp
	}
}

// decodeRequest reads body as hook's request: JSON whose apiVersion and kind are the hook's.
func decodeRequest(body []byte, hook string, into any) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return fmt.Errorf("the %s request is not JSON: %v", hook, err)
	}
	want := runtimehooksv1.GroupVersion.WithKind(hook + "Request")
	if tm.APIVersion != want.GroupVersion().String() || tm.Kind != want.Kind {
		return fmt.Errorf("the %s request must have apiVersion %s and kind %s, not %q and %q", hook, want.GroupVersion(), want.Kind, tm.APIVersion, tm.Kind)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("reading the %s request: %v", hook, err)
	}
	return nil
}

func (s *Server) discovery(_ context.Context, _ *runtimehooksv1.DiscoveryRequest, resp *runtimehooksv1.DiscoveryResponse) {
	for _, h := range s.handlers() {
		if h.name == "" {
			continue
		}
		resp.Handlers = append(resp.Handlers, runtimehooksv1.ExtensionHandler{
			Name:           h.name,
			RequestHook:    runtimehooksv1.GroupVersionHook{APIVersion: runtimehooksv1.GroupVersion.String(), Hook: h.hook},
			TimeoutSeconds: new(int32(timeoutSeconds)),
			// Fail: when the extension cannot answer, Cluster API retries rather than replace
			// machines the user asked to update in place.
			FailurePolicy: new(runtimehooksv1.FailurePolicyFail),
		})
	}
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

func (s *Server) canUpdateMachineSet(_ context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	resp.InfrastructureMachineTemplatePatch = coverage(resp, req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate,
		"infrastructureMachineTemplate", "AnvilMachineTemplate", func(c, d *infrav1.AnvilMachineTemplate) (runtimehooksv1.Patch, string) {
			p := inplace.CanUpdateMachineSet(c.Spec, d.Spec)
			return p, covered(p, c.Spec.Template.Spec.Image, d.Spec.Template.Spec.Image)
		})
}

// canUpdateMachine is KubeadmControlPlane's question: nothing is covered, and a new image
// is answered with why (inplace.ControlPlaneKept).
func (s *Server) canUpdateMachine(_ context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	resp.InfrastructureMachinePatch = coverage(resp, req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine,
		"infrastructureMachine", "AnvilMachine", func(c, d *infrav1.AnvilMachine) (runtimehooksv1.Patch, string) {
			p := inplace.CanUpdateMachine(c.Spec, d.Spec)
			if d.Spec.Image != c.Spec.Image {
				return p, inplace.ControlPlaneKept
			}
			return p, covered(p, c.Spec.Image, d.Spec.Image)
		})
}

// coverage answers a CanUpdate request about the current and desired objects of field:
// when both are anvil's kind, cover decides (the patch and the answer's message); when they
// are another provider's, Success and nothing covered (Cluster API replaces the machines);
// when they cannot be read, a Failure saying why.
func coverage[T any](resp runtimehooksv1.ResponseObject, current, desired runtime.RawExtension, field, kind string,
	cover func(current, desired *T) (runtimehooksv1.Patch, string)) runtimehooksv1.Patch {
	var c, d T
	ours, err := decodeAnvil(current, "current."+field, kind, &c)
	if err == nil && ours {
		ours, err = decodeAnvil(desired, "desired."+field, kind, &d)
	}
	switch {
	case err != nil:
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return runtimehooksv1.Patch{}
	case !ours:
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		resp.SetMessage(fmt.Sprintf("the %s is not an %s: anvil updates nothing of it in place", field, kind))
		return runtimehooksv1.Patch{}
	}
	p, msg := cover(&c, &d)
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	resp.SetMessage(msg)
	return p
}

func covered(p runtimehooksv1.Patch, from, to string) string {
	if !p.IsDefined() {
		return "no change anvil applies in place (only a new image is)"
	}
	return fmt.Sprintf("anvil reimages in place from %s to %s; any other change needs new machines", from, to)
}

func (s *Server) updateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	var desired infrav1.AnvilMachine
	ours, err := decodeAnvil(req.Desired.InfrastructureMachine, "desired.infrastructureMachine", "AnvilMachine", &desired)
	switch {
	case err == nil && !ours:
		err = errors.New("desired.infrastructureMachine is not an AnvilMachine: anvil updates only AnvilMachines in place")
	case err == nil && (desired.Name == "" || desired.Namespace == ""):
		err = errors.New("desired.infrastructureMachine has no name or namespace")
	}
	if err != nil {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetMessage(err.Error())
		return
	}
	p, err := s.progress(ctx, &desired)
	if err != nil {
		// The apiserver or the cache may come back: ask again rather than fail the update.
		p = inplace.Progress{Outcome: inplace.OutcomeInProgress, RetryAfterSeconds: inplace.RetryAfterSeconds, Message: err.Error()}
	}
	resp.SetMessage(p.Message)
	resp.SetRetryAfterSeconds(p.RetryAfterSeconds)
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	if p.Outcome != inplace.OutcomeInProgress && p.Outcome != inplace.OutcomeDone {
		resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
		resp.SetRetryAfterSeconds(0)
	}
}

// progress reads the AnvilMachine the request names and its anvil Machine, and decides.
func (s *Server) progress(ctx context.Context, desired *infrav1.AnvilMachine) (inplace.Progress, error) {
	am := &infrav1.AnvilMachine{}
	if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(desired), am); err != nil {
		if apierrors.IsNotFound(err) {
			return inplace.Progress{Outcome: inplace.OutcomeFailed, Message: fmt.Sprintf("AnvilMachine %s/%s not found", desired.Namespace, desired.Name)}, nil
		}
		return inplace.Progress{}, fmt.Errorf("reading AnvilMachine %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	m, err := s.Machines.AnvilMachineOf(ctx, am)
	if err != nil {
		return inplace.Progress{}, fmt.Errorf("reading the anvil Machine of AnvilMachine %s/%s: %w", am.Namespace, am.Name, err)
	}
	return inplace.UpdateMachineProgress(desired.Spec, am, m), nil
}

// decodeAnvil reads raw, which the request calls field, into out when it is anvil's kind:
// false (and no error) when it is another provider's object, an error when it is missing
// or is anvil's kind but cannot be read.
func decodeAnvil(raw runtime.RawExtension, field, kind string, out any) (bool, error) {
	if len(raw.Raw) == 0 {
		return false, fmt.Errorf("the request has no %s", field)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw.Raw, &tm); err != nil {
		return false, fmt.Errorf("%s is not a JSON object: %v", field, err)
	}
	if tm.GroupVersionKind() != infrav1.GroupVersion.WithKind(kind) {
		return false, nil
	}
	if err := json.Unmarshal(raw.Raw, out); err != nil {
		return false, fmt.Errorf("%s is not a valid %s: %v", field, kind, err)
	}
	return true, nil
}
