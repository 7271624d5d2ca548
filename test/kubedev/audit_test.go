package kubedev

import (
	"strings"
	"testing"
)

func TestCountWrites(t *testing.T) {
	log := strings.Join([]string{
		`{"verb":"create","userAgent":"capi-manager/v1.14.2 (linux/amd64) kubernetes/abc","user":{"username":"admin"},"responseStatus":{"code":201}}`,
		`{"verb":"patch","userAgent":"capi-manager/v1.14.2","user":{"username":"admin"},"responseStatus":{"code":200}}`,
		`{"verb":"patch","userAgent":"anvil/v0","user":{"username":"admin"},"impersonatedUser":{"username":"system:serviceaccount:anvil-system:anvil-capi-provider"},"responseStatus":{"code":200}}`,
		// A conflict writes nothing; a read is not a write.
		`{"verb":"update","userAgent":"anvil/v0","user":{"username":"admin"},"responseStatus":{"code":409}}`,
		`{"verb":"get","userAgent":"anvil/v0","user":{"username":"admin"},"responseStatus":{"code":200}}`,
		`{"verb":"delete","userAgent":"kubectl/v1.36.3","user":{"username":"admin"},"responseStatus":{"code":200}}`,
	}, "\n")
	got, err := CountWrites(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Writer]int{
		{"capi-manager", "admin"}: 2,
		{"anvil", "system:serviceaccount:anvil-system:anvil-capi-provider"}: 1,
		{"kubectl", "admin"}: 1,
	}
	if len(got) != len(want) {
		t.Errorf("CountWrites = %v, want %v", got, want)
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%s: %d writes, want %d (all: %v)", w, got[w], n, got)
		}
	}
	if _, err := CountWrites(strings.NewReader("{not json")); err == nil {
		t.Error("a line that is not JSON: no error")
	}
}
