package main

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/anvil-dev/anvil/test/sites"
)

// requestCounts are a level's apiserver's own count of requests (apiserver_request_total)
// by "VERB resource[/subresource]", every code together.
func requestCounts(ctx context.Context, l *sites.Level) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(l.Env.Config)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return nil, err
		}
		key := label(line, "verb") + " " + label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			key += "/" + sub
		}
		counts[key] += v
	}
	return counts, sc.Err()
}

// label reads one label's value from a metrics line.
func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
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
