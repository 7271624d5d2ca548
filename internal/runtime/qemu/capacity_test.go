package qemu

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A pool offers its host's memory times the ratio in whole GiB, so its status prints it so.
func TestScaledMemoryInWholeGiB(t *testing.T) {
	for _, tc := range []struct {
		memTotalKiB int64
		ratio       float64
		want        string
	}{
		{24684092, 1, "23Gi"},
		{24684092, 1.5, "35Gi"},
		{2097152, 1, "2Gi"},
		{524288, 1, "512Mi"}, // under a GiB: as it is
	} {
		r := scaled(1000, tc.memTotalKiB*1024, 1, tc.ratio)
		if got := resource.NewQuantity(r.MemoryBytes, resource.BinarySI).String(); got != tc.want {
			t.Errorf("MemTotal %d KiB × %g: %s, want %s", tc.memTotalKiB, tc.ratio, got, tc.want)
		}
	}
}
