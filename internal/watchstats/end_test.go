package watchstats

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func status(err error) runtime.Object {
	s := err.(apierrors.APIStatus).Status()
	return &s
}

func TestClassify(t *testing.T) {
	gone := status(apierrors.NewResourceExpired("too old resource version: 5 (80)"))
	goneCode := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonGone}
	internal := status(apierrors.NewInternalError(errors.New("unable to decode an event from the watch stream")))
	forbidden := status(apierrors.NewForbidden(schema.GroupResource{Resource: "machines"}, "", nil))
	for _, tc := range []struct {
		name    string
		errObj  runtime.Object
		stopped bool
		events  int
		lived   time.Duration
		asked   *int64
		want    End
	}{
		{"410 Expired in the stream", gone, false, 1, time.Second, ptr.To[int64](300), EndExpired},
		{"410 Gone in the stream", goneCode, false, 1, time.Second, ptr.To[int64](300), EndExpired},
		{"the stop an expiry causes is still an expiry", gone, true, 1, time.Second, ptr.To[int64](300), EndExpired},
		{"an internal error", internal, false, 1, time.Second, ptr.To[int64](300), EndFailed},
		{"forbidden", forbidden, false, 1, time.Second, nil, EndFailed},
		{"not a Status", &metav1.List{}, false, 1, time.Second, nil, EndFailed},
		{"stopped by the informer", nil, true, 1, time.Second, ptr.To[int64](300), EndStopped},
		{"closed at its timeout", nil, false, 1, 300 * time.Second, ptr.To[int64](300), EndTimedOut},
		{"closed a little before its timeout: the apiserver's clock started later", nil, false, 1, 290 * time.Second, ptr.To[int64](300), EndTimedOut},
		{"closed early: cut", nil, false, 1, 10 * time.Second, ptr.To[int64](300), EndClosed},
		{"closed with no timeout asked", nil, false, 1, time.Hour, nil, EndClosed},
		{"closed within a second, no event: client-go relists", nil, false, 0, 300 * time.Millisecond, ptr.To[int64](300), EndShort},
		{"closed within a second after an event: resumed", nil, false, 1, 300 * time.Millisecond, ptr.To[int64](300), EndClosed},
		{"closed after a second without an event: resumed", nil, false, 0, 2 * time.Second, ptr.To[int64](300), EndClosed},
		{"stopped within a second", nil, true, 0, 300 * time.Millisecond, ptr.To[int64](300), EndStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.errObj, tc.stopped, tc.events, tc.lived, tc.asked); got != tc.want {
				t.Errorf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestIsList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
		opts  metav1.ListOptions
		want  bool
	}{
		{"a list", false, metav1.ListOptions{ResourceVersion: "0"}, true},
		{"a list's next page", false, metav1.ListOptions{Continue: "token"}, false},
		{"a watch resumed", true, metav1.ListOptions{ResourceVersion: "42"}, false},
		{"a watch-list", true, metav1.ListOptions{SendInitialEvents: ptr.To(true)}, true},
		{"a watch saying no initial events", true, metav1.ListOptions{SendInitialEvents: ptr.To(false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsList(tc.watch, tc.opts); got != tc.want {
				t.Errorf("IsList = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEndNames(t *testing.T) {
	seen := map[string]bool{}
	for e := EndUnspecified; e < endCount; e++ {
		if seen[e.String()] {
			t.Errorf("two ends named %q", e)
		}
		seen[e.String()] = true
	}
}
