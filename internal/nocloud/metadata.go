package nocloud

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MetaData is a NoCloud seed's meta-data: instance-id and local-hostname, then each extra
// key in sorted order, one "key: value" line each. Every value and every extra key is a
// YAML double-quoted scalar of printable ASCII (see Quote), so no value can end its line
// or start another key, whatever it holds; the caller checks the keys (mri.ValidateMetaData)
// so that none of them repeats instance-id or local-hostname.
func MetaData(instanceID, hostname string, extra map[string]string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "instance-id: %s\nlocal-hostname: %s\n", Quote(instanceID), Quote(hostname))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		fmt.Fprintf(&b, "%s: %s\n", Quote(k), Quote(extra[k]))
	}
	return []byte(b.String())
}

// Quote is s as a YAML double-quoted scalar made only of printable ASCII: '"' and '\'
// escaped, and every other character outside ' '..'~' (line breaks, tabs, control and
// non-ASCII characters, invalid UTF-8 as U+FFFD) written as \uXXXX or \UXXXXXXXX, escapes
// YAML 1.1 (PyYAML, which cloud-init uses) and 1.2 both read. JSON's own escaping would
// leave C1 controls and U+FFFE raw, which PyYAML refuses, failing the whole file.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
