package scheduler

import "testing"

func TestUnmetAnnotations(t *testing.T) {
	const k = "dev.anvil.kubernetes.version"
	for _, c := range []struct {
		name           string
		required, have map[string]string
		want           string
	}{
		{"nothing required", nil, map[string]string{k: "v1.36.3"}, ""},
		{"met", map[string]string{k: "v1.36.3"}, map[string]string{k: "v1.36.3", "other": "x"}, ""},
		{"lacking", map[string]string{k: "v1.36.3"}, map[string]string{}, "lacks " + k + "=v1.36.3"},
		{"another value", map[string]string{k: "v1.36.3"}, map[string]string{k: "v1.35.0"}, "has " + k + "=v1.35.0, not v1.36.3"},
		{"an empty value is a value", map[string]string{"a": ""}, map[string]string{}, "lacks a="},
		{"every unmet one, in key order", map[string]string{"b": "2", "a": "1"}, map[string]string{"b": "3"}, "lacks a=1; has b=3, not 2"},
		{"annotations not read: held back, saying why", map[string]string{k: "v1.36.3"}, nil,
			"cannot be checked: this manager reads no image (--image-architectures=any); let it read the registry or drop requiredImageAnnotations"},
		{"nothing required, nothing read", nil, nil, ""},
	} {
		if got := UnmetAnnotations(c.required, c.have); got != c.want {
			t.Errorf("%s: UnmetAnnotations(%v, %v) = %q, want %q", c.name, c.required, c.have, got, c.want)
		}
	}
}
