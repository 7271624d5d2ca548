package console

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestTailStart(t *testing.T) {
	for _, tc := range []struct {
		log   string
		lines int64
		want  string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"}, // a last line without its newline is a line
		{"a\nb\nc", 2, "b\nc"},
		{"\n\n\n", 2, "\n\n"},
		{"login: ", 1, "login: "},
	} {
		log := NewMemoryLog(1 << 20)
		log.Write([]byte(tc.log))
		from, err := TailStart(log, int64(len(tc.log)), tc.lines)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.log[from:]; got != tc.want {
			t.Errorf("TailStart(%q, %d lines) = %q, want %q", tc.log, tc.lines, got, tc.want)
		}
	}
}

// TailStart agrees with splitting the whole log into lines, for logs longer than the
// chunk it reads backwards by and lines that straddle chunks.
func TestTailStartAgreesWithSplittingLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var b bytes.Buffer
		for range rng.IntN(3 * tailChunk) {
			if rng.IntN(40) == 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte('x')
			}
		}
		text := b.String()
		lines := rng.Int64N(200) + 1
		log := NewMemoryLog(1 << 20)
		log.Write(b.Bytes())
		from, err := TailStart(log, int64(len(text)), lines)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := text[from:], naiveTail(text, int(lines)); got != want {
			t.Fatalf("tail of %d lines of a %d-byte log: got %d bytes, want %d", lines, len(text), len(got), len(want))
		}
	}
}

func naiveTail(text string, lines int) string {
	parts := strings.SplitAfter(text, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts[max(len(parts)-lines, 0):], "")
}
