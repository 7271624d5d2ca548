package measure

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateAll creates the n objects newObj returns, from o.creators goroutines, and reports
// when the first create was sent and when the last returned.
func CreateAll(ctx context.Context, c client.Client, n, creators int, newObj func(i int) client.Object) (first, last time.Time, err error) {
	first, last, _, err = CreateAllTimed(ctx, c, n, creators, newObj)
	return first, last, err
}

// CreateAllTimed is CreateAll that also returns when each object's create returned (by
// its index; zero for an object not created).
func CreateAllTimed(ctx context.Context, c client.Client, n, creators int, newObj func(i int) client.Object) (first, last time.Time, created []time.Time, err error) {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	created = make([]time.Time, n)
	first = time.Now()
	for w := 0; w < creators; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := c.Create(ctx, newObj(i)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				created[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	return first, time.Now(), created, firstErr
}

// ForEach runs f for 0..n-1 from workers goroutines and returns the first error.
func ForEach(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Namespace is a Namespace object of that name.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// ReadMetrics reads a server's /metrics (Prometheus text) through rc and calls sample for
// every line of a metric in names, with a reader of its labels and its value.
func ReadMetrics(ctx context.Context, rc rest.Interface, names []string, sample func(name string, label func(string) string, value float64)) error {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return err
	}
	return ParseMetrics(bytes.NewReader(raw), names, sample)
}

// ReadMetricsURL is ReadMetrics from url, with token as a bearer token when not empty. The
// server's certificate is not checked: the scenarios read their own children's metrics on
// loopback, served with certificates made at their start.
func ReadMetricsURL(ctx context.Context, url, token string, names []string, sample func(name string, label func(string) string, value float64)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body, names, sample)
}

// ParseMetrics calls sample for every line of r (Prometheus text) of a metric in names.
func ParseMetrics(r io.Reader, names []string, sample func(name string, label func(string) string, value float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok {
			// A metric without labels: "name value".
			name, _, _ = strings.Cut(line, " ")
		}
		if strings.HasPrefix(line, "#") || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return fmt.Errorf("metrics line %q: %w", line, err)
		}
		sample(name, func(l string) string { return metricLabel(line, l) }, v)
	}
	return sc.Err()
}

// metricLabel reads one label's value from a metrics line ("" when it has none).
func metricLabel(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}
