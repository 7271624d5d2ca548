package imagebuild

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metav1Time truncates to seconds, as the API server stores it, so a decision made twice
// from the same observation writes the same status.
func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
