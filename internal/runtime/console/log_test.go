package console

import (
	"context"
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
