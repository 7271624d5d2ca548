// Package events writes the Events a person looks for (`kubectl describe`, `kubectl get
// events`) through the events API (events.k8s.io/v1), under one rate limit per process:
// when a fleet changes at once (10,000 Machines scheduled, a site's Hosts all provisioned)
// the Events past the limit are dropped and counted (anvil_events_dropped_total), never
// queued without bound, so the apiserver is not flooded. Conditions stay the truth; an
// Event says when something happened. The events API counts Events of one reason and action
// on one object (and one related object) within a few minutes as one series: the count
// grows, the first note stays. Events about different parts of one object name the part
// as related (NormalAbout).
package events

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults of the per-process limit: a burst of a few hundred (a pool's worth of Machines
// starting), then 20 a second.
const (
	DefaultPerSecond = 20
	DefaultBurst     = 200
)

var (
	dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anvil_events_dropped_total",
		Help: "Events not written because the process's Event rate limit was reached, by reason.",
	}, []string{"reason"})
	registerOnce sync.Once
)

// Recorder writes Events for one component (the controller or poollet named in each
// Event's reportingController).
type Recorder struct {
	to    events.EventRecorder
	limit *rate.Limiter
}

// Limit is one process's Event budget, shared by its Recorders.
type Limit struct{ l *rate.Limiter }

// NewLimit is a budget of perSecond Events a second with bursts of burst.
func NewLimit(perSecond float64, burst int) *Limit {
	registerOnce.Do(func() { metrics.Registry.MustRegister(dropped) })
	return &Limit{l: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// processLimit is the budget New gives a Recorder without one of its own.
var processLimit = NewLimit(DefaultPerSecond, DefaultBurst)

// SetProcessLimit replaces the process's budget for the Recorders made after it: for a
// process that writes many Events on purpose (a test of a whole package in one process).
func SetProcessLimit(perSecond float64, burst int) { processLimit = NewLimit(perSecond, burst) }

// New is a Recorder writing through to under limit (the process's when nil).
func New(to events.EventRecorder, limit *Limit) *Recorder {
	if limit == nil {
		limit = processLimit
	}
	return &Recorder{to: to, limit: limit.l}
}

// Normal records that something expected happened to obj: reason names it (Reimaged),
// action what the component did (Reimage).
func (r *Recorder) Normal(obj runtime.Object, reason, action, format string, args ...any) {
	r.record(obj, corev1.EventTypeNormal, reason, action, format, args...)
}

// Warning records what a person should look at.
func (r *Recorder) Warning(obj runtime.Object, reason, action, format string, args ...any) {
	r.record(obj, corev1.EventTypeWarning, reason, action, format, args...)
}

// NormalAbout and WarningAbout record an Event regarding obj that concerns a second object,
// related (a build's builder Machine). The events API counts Events of one reason and
// action on one object as one series, keeping the first note: Events on one object about
// different things (one per architecture of a build) must name them to stay apart.
func (r *Recorder) NormalAbout(obj, related runtime.Object, reason, action, format string, args ...any) {
	r.recordAbout(obj, related, corev1.EventTypeNormal, reason, action, format, args...)
}

// WarningAbout is NormalAbout for what a person should look at.
func (r *Recorder) WarningAbout(obj, related runtime.Object, reason, action, format string, args ...any) {
	r.recordAbout(obj, related, corev1.EventTypeWarning, reason, action, format, args...)
}

func (r *Recorder) record(obj runtime.Object, typ, reason, action, format string, args ...any) {
	r.recordAbout(obj, nil, typ, reason, action, format, args...)
}

func (r *Recorder) recordAbout(obj, related runtime.Object, typ, reason, action, format string, args ...any) {
	if r == nil || r.to == nil {
		return
	}
	if !r.limit.Allow() {
		dropped.WithLabelValues(reason).Inc()
		return
	}
	// The note is formatted here: events' own Eventf would read a '%' in a message as a verb.
	r.to.Eventf(obj, related, typ, reason, action, "%s", fmt.Sprintf(format, args...))
}
