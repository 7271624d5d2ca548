package watchstats

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Key names whose informers are counted: the client (manager, poollet, ...) and the kind.
type Key struct{ Client, Kind string }

// Counts are one Key's relists and watch ends so far.
type Counts struct {
	// Relists are the lists after an informer's first: each follows an expired, short or
	// failed watch.
	Relists int64 `json:"relists"`
	// Ends are the watches ended, by End's String (timeout, closed, short, expired, error).
	Ends map[string]int64 `json:"ends"`
}

type counts struct {
	relists atomic.Int64
	ends    [endCount]atomic.Int64
}

var (
	all          sync.Map // Key -> *counts
	registerOnce sync.Once
)

// countsOf is key's counters, made on first use; it registers the collector on
// controller-runtime's metrics registry, which every anvil process serves.
func countsOf(key Key) *counts {
	registerOnce.Do(func() { metrics.Registry.MustRegister(collector{}) })
	c, _ := all.LoadOrStore(key, &counts{})
	return c.(*counts)
}

// Read returns the counts of every Key seen in this process so far.
func Read() map[Key]Counts {
	out := map[Key]Counts{}
	all.Range(func(k, v any) bool {
		c := v.(*counts)
		r := Counts{Relists: c.relists.Load(), Ends: map[string]int64{}}
		for _, e := range counted {
			if n := c.ends[e].Load(); n > 0 {
				r.Ends[e.String()] = n
			}
		}
		out[k.(Key)] = r
		return true
	})
	return out
}

// Sum adds up the counts of one client over its kinds.
func Sum(m map[Key]Counts, client string) Counts {
	s := Counts{Ends: map[string]int64{}}
	for k, c := range m {
		if k.Client != client {
			continue
		}
		s.Relists += c.Relists
		for e, n := range c.Ends {
			s.Ends[e] += n
		}
	}
	return s
}

var (
	relistsDesc = prometheus.NewDesc("anvil_informer_relists_total",
		"Lists an informer made after its first, each after an expired (410) or failed watch.", []string{"client", "kind"}, nil)
	endsDesc = prometheus.NewDesc("anvil_informer_watch_ends_total",
		"Watches of an informer that ended, by how: timeout (the one it asked for), closed (early, by the apiserver or the connection; resumed), short (closed within a second before any event; client-go relists), expired (410; relisted), error (an error event, or the watch refused).",
		[]string{"client", "kind", "reason"}, nil)
)

// collector exports the counts; they live in this package so Read needs no registry.
type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- relistsDesc
	ch <- endsDesc
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	m := Read()
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Client < keys[j].Client || keys[i].Client == keys[j].Client && keys[i].Kind < keys[j].Kind
	})
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(relistsDesc, prometheus.CounterValue, float64(m[k].Relists), k.Client, k.Kind)
		for _, e := range counted {
			ch <- prometheus.MustNewConstMetric(endsDesc, prometheus.CounterValue, float64(m[k].Ends[e.String()]), k.Client, k.Kind, e.String())
		}
	}
}
