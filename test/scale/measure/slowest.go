package measure

import "time"

// Slowest is the object whose time from created to done was longest, and that time;
// objects missing from either map are left out.
func Slowest(created, done map[string]time.Time) (name string, took time.Duration) {
	for n, c := range created {
		d, ok := done[n]
		if !ok {
			continue
		}
		if t := d.Sub(c); name == "" || t > took || t == took && n < name {
			name, took = n, t
		}
	}
	return name, took
}
