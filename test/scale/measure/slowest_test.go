package measure

import (
	"testing"
	"time"
)

func TestSlowest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name          string
		created, done map[string]time.Time
		want          string
		took          time.Duration
	}{
		{name: "none"},
		{name: "one", created: map[string]time.Time{"a": at(0)}, done: map[string]time.Time{"a": at(2)}, want: "a", took: 2 * time.Second},
		{name: "created late, done late: the longest span, not the last done",
			created: map[string]time.Time{"a": at(0), "b": at(5)}, done: map[string]time.Time{"a": at(4), "b": at(6)},
			want: "a", took: 4 * time.Second},
		{name: "not done yet is left out",
			created: map[string]time.Time{"a": at(0), "b": at(1)}, done: map[string]time.Time{"b": at(2)}, want: "b", took: time.Second},
		{name: "a tie goes to the first name",
			created: map[string]time.Time{"b": at(0), "a": at(0)}, done: map[string]time.Time{"a": at(1), "b": at(1)}, want: "a", took: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, took := Slowest(tc.created, tc.done)
			if name != tc.want || took != tc.took {
				t.Errorf("Slowest = %q, %s; want %q, %s", name, took, tc.want, tc.took)
			}
		})
	}
}

func TestStatFields(t *testing.T) {
	f, err := statFields("4242 (kube apiserver) S 17 4242 17 0 -1 4194560 1 0 0 0 250 125 0 0 20 0 12 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "4242" || f[1] != "kube apiserver" || f[3] != "17" || f[13] != "250" || f[14] != "125" {
		t.Errorf("fields %q", f)
	}
	if _, err := statFields("garbage"); err == nil {
		t.Error("a line without (name) parsed")
	}
}
