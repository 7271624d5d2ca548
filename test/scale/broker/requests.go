package main

import (
	"context"
	"math"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/anvil-dev/anvil/test/scale/measure"
	"github.com/anvil-dev/anvil/test/sites"
)

// requestCounts are a level's apiserver's own count of requests (apiserver_request_total)
// by "VERB resource[/subresource]", every code together.
func requestCounts(ctx context.Context, l *sites.Level) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(l.Env.Config)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	err = measure.ReadMetrics(ctx, cs.RESTClient(), []string{"apiserver_request_total"}, func(_ string, label func(string) string, v float64) {
		key := label("verb") + " " + label("resource")
		if sub := label("subresource"); sub != "" {
			key += "/" + sub
		}
		counts[key] += v
	})
	return counts, err
}

// requestsPerMachine are the requests (but LIST and WATCH) counted between before and
// after, per Machine of the round, those of at least 0.05.
func requestsPerMachine(before, after map[string]float64, machines int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		verb := k[:strings.IndexByte(k, ' ')]
		if verb == "LIST" || verb == "WATCH" {
			continue
		}
		if per := (v - before[k]) / float64(machines); per >= 0.05 {
			out[k] = math.Round(per*100) / 100
		}
	}
	return out
}
