package watchstats

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// End is how one watch stream ended.
type End int

const (
	EndUnspecified End = iota
	// EndStopped: the informer stopped it (after reading an error, or shutting down).
	EndStopped
	// EndTimedOut: the apiserver closed it at the timeout the informer asked for; routine.
	EndTimedOut
	// EndClosed: closed early without an error: the apiserver cut it (a watcher too slow
	// for its watch cache, a restart) or the connection was lost. Resumed, not relisted.
	EndClosed
	// EndShort: closed like EndClosed, but within a second and before any event: client-go
	// takes that for a broken watch and relists.
	EndShort
	// EndExpired: 410 Gone, "too old resource version": the informer lists again.
	EndExpired
	// EndFailed: any other error event or refusal.
	EndFailed
	endCount
)

// counted are the ends reported; a stop is the informer's own doing.
var counted = []End{EndTimedOut, EndClosed, EndShort, EndExpired, EndFailed}

func (e End) String() string {
	switch e {
	case EndStopped:
		return "stopped"
	case EndTimedOut:
		return "timeout"
	case EndClosed:
		return "closed"
	case EndShort:
		return "short"
	case EndExpired:
		return "expired"
	case EndFailed:
		return "error"
	}
	return "unspecified"
}

// timedOutShare of the asked timeout after which a close counts as that timeout: the
// apiserver starts its clock a little after the client does.
const timedOutShare = 0.9

// shortWatch is client-go's limit: a watch closed sooner without an event is relisted.
const shortWatch = time.Second

// Classify says how a watch ended: errObj is the first error event's object (nil without
// one), stopped whether the informer stopped it before it closed, events how many it
// passed on, lived how long it was open and asked the timeoutSeconds it asked for (nil for
// none). An error outranks the stop it causes.
func Classify(errObj runtime.Object, stopped bool, events int, lived time.Duration, asked *int64) End {
	switch {
	case errObj != nil:
		return errorEnd(apierrors.FromObject(errObj))
	case stopped:
		return EndStopped
	case asked != nil && lived.Seconds() >= timedOutShare*float64(*asked):
		return EndTimedOut
	case events == 0 && lived < shortWatch:
		return EndShort
	}
	return EndClosed
}

// errorEnd is the end an error (an error event's, or a refused watch's) makes.
func errorEnd(err error) End {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return EndExpired
	}
	return EndFailed
}

// IsList says whether a request with opts fetches the whole collection: a plain list's
// first page, or a watch asking for the initial events (client-go's watch-list).
func IsList(watch bool, opts metav1.ListOptions) bool {
	if watch {
		return opts.SendInitialEvents != nil && *opts.SendInitialEvents
	}
	return opts.Continue == ""
}
