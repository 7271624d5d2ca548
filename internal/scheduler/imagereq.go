package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// UnmetAnnotations says what of a Machine's requiredImageAnnotations its image's annotations
// (have) do not satisfy, key by key in order: "" when every one is there with its value.
// have is nil when the scheduler reads no image (the manager's --image-architectures=any):
// a requirement it cannot check holds the Machine back too, saying so, rather than letting
// an image that may lack it boot.
func UnmetAnnotations(required, have map[string]string) string {
	if len(required) == 0 {
		return ""
	}
	if have == nil {
		return "cannot be checked: this manager reads no image (--image-architectures=any); let it read the registry or drop requiredImageAnnotations"
	}
	var unmet []string
	for _, k := range slices.Sorted(maps.Keys(required)) {
		switch got, ok := have[k]; {
		case !ok:
			unmet = append(unmet, fmt.Sprintf("lacks %s=%s", k, required[k]))
		case got != required[k]:
			unmet = append(unmet, fmt.Sprintf("has %s=%s, not %s", k, got, required[k]))
		}
	}
	return strings.Join(unmet, "; ")
}
