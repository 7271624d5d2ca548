package firstboot

import (
	"fmt"
	"strings"
	"unicode/utf8"

	ignition "github.com/coreos/ignition/v2/config"
)

const (
	// MaxMessage bounds ValidateIgnition's message: a condition's message holds at most
	// 32768 bytes, and the poollet puts the Secret's name and key before it.
	MaxMessage = 8 << 10
	// maxEntries is how many of Ignition's errors a message lists; the rest are counted.
	maxEntries = 10
	// maxEntry bounds one listed error (an entry may quote a value of the config).
	maxEntry = 512
)

// ValidateIgnition refuses a config Ignition itself would refuse. Warnings are not errors.
// The message names the first errors Ignition reports and counts the others: a config of
// thousands of errors would otherwise give a message no condition can hold, and Ignition's
// own report.String takes time quadratic in their number.
func ValidateIgnition(data []byte) error {
	_, report, err := ignition.Parse(data)
	if err == nil {
		return nil
	}
	var listed []string
	more := 0
	for _, e := range report.Entries {
		if !e.Kind.IsFatal() {
			continue
		}
		if len(listed) == maxEntries {
			more++
			continue
		}
		listed = append(listed, clip(e.String(), maxEntry))
	}
	msg := "the Ignition config is invalid: " + clip(err.Error(), maxEntry)
	if len(listed) > 0 {
		msg += ": " + strings.Join(listed, "; ")
	}
	if more > 0 {
		msg += fmt.Sprintf("; and %d more errors", more)
	}
	return fmt.Errorf("%s", clip(msg, MaxMessage))
}

// clip shortens s to at most n bytes, cutting between runes and marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
