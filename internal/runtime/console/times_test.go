package console

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Whatever the writes and their times, the start SizeAt gives for a time t never leaves
// out a byte written after t, and takes in no byte written more than a second before t.
func TestMemoryLogSizeAtIsWithinASecond(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := NewMemoryLog(1 << 20)
		start := time.Unix(1_700_000_000, 0)
		now := start
		type write struct {
			at        time.Time
			sizeAfter int64
		}
		var writes []write
		for range rapid.IntRange(0, 40).Draw(t, "writes") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "gap")))
			n := rapid.IntRange(1, 50).Draw(t, "bytes")
			_, _ = l.write(make([]byte, n), now)
			size, _ := l.Size()
			writes = append(writes, write{now, size})
		}
		q := start.Add(time.Duration(rapid.Int64Range(0, int64(now.Sub(start)+2*time.Second)).Draw(t, "query")))
		got, _ := l.SizeAt(q)
		// sizeAt(t) is the log's true size at t.
		sizeAt := func(at time.Time) int64 {
			var s int64
			for _, w := range writes {
				if !w.at.After(at) {
					s = w.sizeAfter
				}
			}
			return s
		}
		if got > sizeAt(q) {
			t.Fatalf("SizeAt(%s) = %d leaves out bytes written after it (the log had %d then)", q.Sub(start), got, sizeAt(q))
		}
		if low := sizeAt(q.Add(-time.Second)); got < low {
			t.Fatalf("SizeAt(%s) = %d takes in bytes written over a second before it (the log had %d a second before)", q.Sub(start), got, low)
		}
	})
}

// A file log's times are what RecordTimes wrote down as it grew; a log without any starts
// at 0, and a line cut by a crash is passed over.
func TestFileLogTimesFromTheRecorder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	l := &FileLog{Path: path}
	defer l.Close()
	if at, err := l.SizeAt(time.Now()); err != nil || at != 0 {
		t.Fatalf("a log with no record of times: %d, %v; want 0", at, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go RecordTimes(ctx, 20*time.Millisecond, func() []string { return []string{path} })
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	waitSizeAt := func(want int64) time.Time {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			now := time.Now()
			if at, _ := l.SizeAt(now); at == want {
				return now
			}
			if now.After(deadline) {
				t.Fatalf("the record never said %d bytes", want)
			}
		}
	}
	write("first\n")
	afterFirst := waitSizeAt(6)
	write("second\n")
	waitSizeAt(13)
	if at, _ := l.SizeAt(afterFirst); at != 6 {
		t.Errorf("SizeAt(after the first line) = %d, want 6: the second line starts there", at)
	}
	if at, _ := l.SizeAt(afterFirst.Add(-time.Hour)); at != 0 {
		t.Errorf("SizeAt(an hour before) = %d, want 0", at)
	}
	// A torn last line, as a crash leaves it, is passed over.
	f, err := os.OpenFile(TimesPath(path), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("17000")
	f.Close()
	if at, err := l.SizeAt(time.Now().Add(time.Hour)); err != nil || at != 13 {
		t.Errorf("with a torn line: %d, %v; want 13", at, err)
	}
}
