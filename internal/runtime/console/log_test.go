package console

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryLogKeepsAtMostItsLimit(t *testing.T) {
	log := NewMemoryLog(10)
	log.Write([]byte("0123456"))
	log.Write([]byte("789abcdef"))
	log.Write([]byte("more"))
	size, _ := log.Size()
	buf := make([]byte, size)
	log.ReadAt(buf, 0)
	if want := "0123456789" + fullLine; string(buf) != want {
		t.Fatalf("log = %q, want %q", buf, want)
	}
}

// A follower gets what is written after it started, in order, and ends once the machine
// is gone, having sent what it wrote last.
func TestCopyFollowsUntilGone(t *testing.T) {
	log := NewMemoryLog(1 << 20)
	log.Write([]byte("boot\n"))
	var gone atomic.Bool
	var got strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Copy(context.Background(), log, 0, true, gone.Load, func(p []byte) error {
			got.Write(p)
			return nil
		})
	}()
	time.Sleep(3 * pollInterval)
	log.Write([]byte("login: "))
	log.Write([]byte("bye\n"))
	gone.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not end once the machine was gone")
	}
	if got.String() != "boot\nlogin: bye\n" {
		t.Fatalf("followed %q", got.String())
	}
}

// Without follow, Copy sends what is there and returns; a cancelled follower returns.
func TestCopyWithoutFollowAndCancelled(t *testing.T) {
	log := NewMemoryLog(1 << 20)
	log.Write([]byte(strings.Repeat("x", 3*readChunk+5)))
	n := 0
	if err := Copy(context.Background(), log, 7, false, func() bool { return false }, func(p []byte) error {
		if len(p) > readChunk {
			t.Errorf("a send of %d bytes, more than the one buffer of %d", len(p), readChunk)
		}
		n += len(p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 3*readChunk+5-7 {
		t.Fatalf("sent %d bytes", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Copy(ctx, log, 0, true, func() bool { return false }, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// floodLog is a log that grows by a GiB a second, as a guest writing as fast as it can:
// it is never all read.
type floodLog struct{ start time.Time }

func (f *floodLog) Size() (int64, error) { return int64(time.Since(f.start)), nil }
func (f *floodLog) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	return len(p), nil
}

// C5: a follower of a flooding machine, sending to a slow caller, holds one buffer: its
// memory does not grow with what the machine writes.
func TestCopyOfAFloodHoldsOneBuffer(t *testing.T) {
	log := &floodLog{start: time.Now()}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sent := int64(0)
	if err := Copy(ctx, log, 0, true, func() bool { return false }, func(p []byte) error {
		sent += int64(len(p))
		time.Sleep(time.Millisecond) // a slow caller
		return ctx.Err()
	}); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	written, _ := log.Size()
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 4*readChunk {
		t.Errorf("the heap grew by %d bytes while the machine wrote %d and %d were sent", grew, written, sent)
	}
	if sent == 0 || written < 10*sent {
		t.Fatalf("the flood did not outrun the caller (%d written, %d sent): the test shows nothing", written, sent)
	}
}

// A FileLog says when its file is written, and when it first appears, so followers need
// not poll it.
func TestFileLogSaysWhenItGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	log := &FileLog{Path: path}
	defer log.Close()
	for _, step := range []struct {
		what  string
		write func() error
	}{
		{"the file made", func() error { return os.WriteFile(path, []byte("boot\n"), 0o600) }},
		{"a line appended", func() error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("login: ")
			return err
		}},
	} {
		grown := log.grown()
		if grown == nil {
			t.Fatal("no inotify instance for the test: the file cannot be watched")
		}
		if err := step.write(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-grown:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the log never said it grew", step.what)
		}
	}
	if size, _ := log.Size(); size != int64(len("boot\nlogin: ")) {
		t.Fatalf("size %d after both writes", size)
	}
}
