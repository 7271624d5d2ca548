package ui

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/anvil-dev/anvil/internal/ui/view"
)

// Change is one row's new value, or its removal (Row nil), as the browser receives it.
type Change struct {
	Kind view.Kind       `json:"kind"`
	Key  string          `json:"key"` // namespace/name, or name for cluster-scoped objects
	Row  json.RawMessage `json:"row"`
}

// Feed holds the latest row of every object the UI watches and passes each change on to
// its subscribers. A row is marshalled once, when it changes, whatever the number of
// subscribers; a change that leaves the row as it was (a resync, a status write of a field
// no page shows) is not sent.
type Feed struct {
	mu   sync.Mutex
	rows map[view.Kind]map[string]json.RawMessage
	subs map[*Subscription]struct{}
}

// NewFeed is an empty feed.
func NewFeed() *Feed {
	return &Feed{rows: map[view.Kind]map[string]json.RawMessage{}, subs: map[*Subscription]struct{}{}}
}

// Subscription receives the changes after its snapshot. Its channel is closed when the
// subscriber fell behind by more than its buffer (or Cancel was called): memory per
// subscriber is bounded, and a browser that lost changes connects again for a new
// snapshot.
type Subscription struct {
	C    <-chan Change
	c    chan Change
	feed *Feed
	once sync.Once
}

// Put sets the row of kind at key.
func (f *Feed) Put(kind view.Kind, key string, row any) {
	raw, err := json.Marshal(row)
	if err != nil {
		return // rows are plain structs: this cannot happen, and a page is better without it than broken
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rows := f.rows[kind]
	if rows == nil {
		rows = map[string]json.RawMessage{}
		f.rows[kind] = rows
	}
	if old, ok := rows[key]; ok && bytes.Equal(old, raw) {
		return
	}
	rows[key] = raw
	f.sendLocked(Change{Kind: kind, Key: key, Row: raw})
}

// Delete removes the row of kind at key.
func (f *Feed) Delete(kind view.Kind, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rows[kind][key]; !ok {
		return
	}
	delete(f.rows[kind], key)
	f.sendLocked(Change{Kind: kind, Key: key})
}

func (f *Feed) sendLocked(c Change) {
	for s := range f.subs {
		select {
		case s.c <- c:
		default:
			f.dropLocked(s)
		}
	}
}

func (f *Feed) dropLocked(s *Subscription) {
	if _, ok := f.subs[s]; ok {
		delete(f.subs, s)
		close(s.c)
	}
}

// Subscribe returns every row now and a subscription to the changes after them; buffer
// is how many changes it may fall behind by.
func (f *Feed) Subscribe(buffer int) ([]Change, *Subscription) {
	c := make(chan Change, buffer)
	s := &Subscription{C: c, c: c, feed: f}
	f.mu.Lock()
	defer f.mu.Unlock()
	var snapshot []Change
	for kind, rows := range f.rows {
		for key, raw := range rows {
			snapshot = append(snapshot, Change{Kind: kind, Key: key, Row: raw})
		}
	}
	f.subs[s] = struct{}{}
	return snapshot, s
}

// Cancel ends the subscription.
func (s *Subscription) Cancel() {
	s.once.Do(func() {
		s.feed.mu.Lock()
		defer s.feed.mu.Unlock()
		s.feed.dropLocked(s)
	})
}
