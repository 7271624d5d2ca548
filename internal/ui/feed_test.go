package ui

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/anvil-dev/anvil/internal/ui/view"
)

func TestFeedSendsChangesOnly(t *testing.T) {
	f := NewFeed()
	f.Put(view.KindMachine, "a/m", map[string]string{"state": "Pending"})
	snapshot, sub := f.Subscribe(8)
	defer sub.Cancel()
	if len(snapshot) != 1 || snapshot[0].Key != "a/m" {
		t.Fatalf("snapshot %+v", snapshot)
	}
	f.Put(view.KindMachine, "a/m", map[string]string{"state": "Pending"}) // unchanged: not sent
	f.Put(view.KindMachine, "a/m", map[string]string{"state": "Running"})
	f.Delete(view.KindMachine, "a/m")
	f.Delete(view.KindMachine, "a/m") // gone already: not sent
	got := []string{}
	for len(sub.C) > 0 {
		c := <-sub.C
		got = append(got, c.Key+"="+string(c.Row))
	}
	if want := []string{`a/m={"state":"Running"}`, "a/m="}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("changes %q, want %q", got, want)
	}
}

// TestFeedDropsASubscriberThatFallsBehind: a subscriber's buffer bounds its memory; past
// it, its channel closes (the browser connects again) and the others go on.
func TestFeedDropsASubscriberThatFallsBehind(t *testing.T) {
	f := NewFeed()
	_, slow := f.Subscribe(2)
	_, fast := f.Subscribe(100)
	for i := range 5 {
		f.Put(view.KindPool, "p", i)
	}
	n := 0
	for range slow.C {
		n++
	}
	if n != 2 {
		t.Errorf("the slow subscriber got %d changes before its channel closed, want its buffer's 2", n)
	}
	if len(fast.C) != 5 {
		t.Errorf("the other subscriber has %d changes, want 5", len(fast.C))
	}
	slow.Cancel() // after the drop: nothing to do, no panic
	fast.Cancel()
	for range fast.C { // what was sent before, then the close
	}
	f.Put(view.KindPool, "p", "after") // no one to send to, and no send on a closed channel
}

// TestFeedSnapshotPlusChangesIsTheState: whatever puts and deletes happen, a subscriber's
// snapshot with the changes after it applied in order is the feed's state.
func TestFeedSnapshotPlusChangesIsTheState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := NewFeed()
		keys := rapid.SampledFrom([]string{"a", "b", "c"})
		apply := func(state map[string]string, c Change) {
			if c.Row == nil {
				delete(state, c.Key)
			} else {
				state[c.Key] = string(c.Row)
			}
		}
		op := func() {
			if rapid.Bool().Draw(t, "put") {
				f.Put(view.KindMachine, keys.Draw(t, "key"), rapid.IntRange(0, 2).Draw(t, "row"))
			} else {
				f.Delete(view.KindMachine, keys.Draw(t, "key"))
			}
		}
		for range rapid.IntRange(0, 10).Draw(t, "before") {
			op()
		}
		snapshot, sub := f.Subscribe(1000)
		seen := map[string]string{}
		for _, c := range snapshot {
			apply(seen, c)
		}
		for range rapid.IntRange(0, 20).Draw(t, "after") {
			op()
		}
		for len(sub.C) > 0 {
			apply(seen, <-sub.C)
		}
		snapshot2, sub2 := f.Subscribe(1)
		sub2.Cancel()
		want := map[string]string{}
		for _, c := range snapshot2 {
			apply(want, c)
		}
		a, _ := json.Marshal(seen)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Fatalf("the subscriber sees %s, the feed holds %s", a, b)
		}
	})
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1:8090": true, "localhost:8090": true, "[::1]:8090": true, "127.0.0.1": true,
		"ui.attacker.example:8090": false, "10.0.0.1:8090": false, "": false, "127.0.0.1.nip.io:8090": false} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
