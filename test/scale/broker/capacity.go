package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/test/sites"
)

// capacity is the propagation delay of a change of what the site's pool has free.
type capacity struct {
	Interval string `json:"poolletInterval"`
	// RegionSeconds run from a Machine's create (or delete) in the site to the region's
	// broker pool's status.allocatable cpu changing.
	RegionSeconds []float64 `json:"regionSeconds"`
	RegionMedian  float64   `json:"regionMedianSeconds"`
	// SiteSeconds run to the site's own pool's status.allocated changing: the part of the
	// delay that is the site's, before the broker can see it.
	SiteSeconds []float64 `json:"siteSeconds"`
	SiteMedian  float64   `json:"siteMedianSeconds"`
}

// capacity alternately creates and deletes a Machine directly in the site, each after a
// random wait shorter than the poollets' interval (so the changes fall at every phase of
// the region poollet's reads), and times each change's arrival at both pools.
func (s *scenario) capacity(ctx context.Context) (*capacity, error) {
	site, region := s.site(), s.region()
	if err := client.IgnoreAlreadyExists(site.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: directNamespace}})); err != nil {
		return nil, err
	}
	out := &capacity{Interval: s.o.interval.String()}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < s.o.samples; i++ {
		// Settled: both pools show the last change before the next one starts.
		time.Sleep(time.Duration(rng.Int64N(int64(s.o.interval))))
		siteBefore, err := cpu(ctx, site, allocated)
		if err != nil {
			return nil, err
		}
		regionBefore, err := cpu(ctx, region, allocatable)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if i%2 == 0 {
			err = site.Client.Create(ctx, s.h.Machine(directNamespace, fmt.Sprintf("capacity-%d", i)))
		} else {
			err = site.Client.Delete(ctx, s.h.Machine(directNamespace, fmt.Sprintf("capacity-%d", i-1)))
		}
		if err != nil {
			return nil, err
		}
		var siteAt, regionAt time.Duration
		for deadline := start.Add(3*s.o.interval + time.Minute); siteAt == 0 || regionAt == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("sample %d: no change seen (site after %s, region after %s)", i, siteAt, regionAt)
			}
			if siteAt == 0 {
				v, err := cpu(ctx, site, allocated)
				if err != nil {
					return nil, err
				}
				if v != siteBefore {
					siteAt = time.Since(start)
				}
			}
			if regionAt == 0 {
				v, err := cpu(ctx, region, allocatable)
				if err != nil {
					return nil, err
				}
				if v != regionBefore {
					regionAt = time.Since(start)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "capacity sample %d: site %.2f s, region %.2f s\n", i, siteAt.Seconds(), regionAt.Seconds())
		out.SiteSeconds = append(out.SiteSeconds, siteAt.Seconds())
		out.RegionSeconds = append(out.RegionSeconds, regionAt.Seconds())
	}
	out.SiteMedian, out.RegionMedian = median(out.SiteSeconds), median(out.RegionSeconds)
	return out, nil
}

type field int

const (
	allocated field = iota
	allocatable
)

// cpu reads the cpu of a status field of l's pool.
func cpu(ctx context.Context, l *sites.Level, f field) (int64, error) {
	p, err := l.MachinePool(ctx)
	if err != nil {
		return 0, err
	}
	if f == allocated {
		return p.Status.Allocated.Cpu().Value(), nil
	}
	return p.Status.Allocatable.Cpu().Value(), nil
}
