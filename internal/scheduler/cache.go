package scheduler

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Cache is the scheduler's state: pools, classes, and a charge per bound Machine. Every
// Machine is charged to at most one pool, once, whether it was assumed by a decision here
// or seen bound in the API, so capacity is never counted twice nor forgotten.
//
// It is safe for concurrent use; ScheduleAndAssume decides and charges under one lock, so
// concurrent decisions never over-commit a pool.
type Cache struct {
	mu         sync.Mutex
	pools      map[string]*Pool
	sorted     []*Pool // by name, for deterministic decisions
	heartbeats map[string]time.Time
	classes    map[string]*Class
	classIndex map[string]int // stable per name, also for classes not created yet
	charges    map[types.UID]*charge
}

// charge is one Machine counted against one pool.
type charge struct {
	pool  string
	class string
	// demand is what was added to the pool's used; zero until the class is known.
	demand  Resources
	counted bool
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{
		pools:      map[string]*Pool{},
		heartbeats: map[string]time.Time{},
		classes:    map[string]*Class{},
		classIndex: map[string]int{},
		charges:    map[types.UID]*charge{},
	}
}

// ClassIndex returns the bit of a class name in Pool.Classes, assigning one if needed.
func (c *Cache) ClassIndex(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classIndexLocked(name)
}

func (c *Cache) classIndexLocked(name string) int {
	i, ok := c.classIndex[name]
	if !ok {
		i = len(c.classIndex)
		c.classIndex[name] = i
	}
	return i
}

// SetClass adds or replaces a class and charges the Machines that waited for it.
func (c *Cache) SetClass(name string, demand Resources, archs ArchSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.classes[name] = &Class{Name: name, Index: c.classIndexLocked(name), Demand: demand, Architectures: archs}
	for _, ch := range c.charges {
		if ch.class == name && !ch.counted {
			c.countLocked(ch)
		}
	}
}

// RemoveClass forgets a class. Machines already charged keep their charge.
func (c *Cache) RemoveClass(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.classes, name)
}

// Class returns the class of that name, or nil.
func (c *Cache) Class(name string) *Class {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classes[name]
}

// SetPool adds or replaces a pool. Its used resources are kept (or, for a pool new to the
// cache, summed from the Machines already charged to it), never taken from p.
func (c *Cache) SetPool(p Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	np := p
	np.HeartbeatExpiry = c.heartbeats[p.Name]
	if old, ok := c.pools[p.Name]; ok {
		np.used = old.used
		*old = np
		return
	}
	np.used = Resources{}
	for _, ch := range c.charges {
		if ch.pool == p.Name && ch.counted {
			np.used.Add(ch.demand)
		}
	}
	c.pools[p.Name] = &np
	c.sorted = append(c.sorted, &np)
	sort.Slice(c.sorted, func(i, j int) bool { return c.sorted[i].Name < c.sorted[j].Name })
}

// RemovePool forgets a pool; charges to it stay until their Machines are forgotten.
func (c *Cache) RemovePool(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pools[name]; !ok {
		return
	}
	delete(c.pools, name)
	for i, p := range c.sorted {
		if p.Name == name {
			c.sorted = append(c.sorted[:i], c.sorted[i+1:]...)
			break
		}
	}
}

// SetHeartbeat records when the pool's Lease expires.
func (c *Cache) SetHeartbeat(pool string, expiry time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heartbeats[pool] = expiry
	if p, ok := c.pools[pool]; ok {
		p.HeartbeatExpiry = expiry
	}
}

// RemoveHeartbeat forgets the pool's Lease.
func (c *Cache) RemoveHeartbeat(pool string) { c.SetHeartbeat(pool, time.Time{}) }

// Observe charges the Machine uid, of class, to pool. Observing the same Machine on the
// same pool again changes nothing; on another pool it moves the charge.
func (c *Cache) Observe(uid types.UID, pool, class string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeLocked(uid, pool, class)
}

func (c *Cache) observeLocked(uid types.UID, pool, class string) {
	if ch, ok := c.charges[uid]; ok {
		if ch.pool == pool {
			return
		}
		c.uncountLocked(ch)
		delete(c.charges, uid)
	}
	ch := &charge{pool: pool, class: class}
	c.charges[uid] = ch
	c.countLocked(ch)
}

// Forget removes the Machine's charge, if any.
func (c *Cache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.charges[uid]; ok {
		c.uncountLocked(ch)
		delete(c.charges, uid)
	}
}

// ChargedPool returns the pool the Machine is charged to, if any.
func (c *Cache) ChargedPool(uid types.UID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.charges[uid]
	if !ok {
		return "", false
	}
	return ch.pool, true
}

// ScheduleAndAssume decides for r and, when a pool fits, charges uid to it before
// releasing the lock, so the next decision already sees the capacity taken.
func (c *Cache) ScheduleAndAssume(uid types.UID, r *Request, now time.Time, s Strategy) Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := Schedule(c.sorted, r, now, s)
	if d.Pool != nil {
		c.observeLocked(uid, d.Pool.Name, r.Class.Name)
		// Hand out a copy: the cache's pool changes under its lock after we return.
		cp := d.Pool.copy()
		d.Pool = &cp
	}
	return d
}

// Pool returns a copy of the named pool, or false.
func (c *Cache) Pool(name string) (Pool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pools[name]
	if !ok {
		return Pool{}, false
	}
	return p.copy(), true
}

func (c *Cache) countLocked(ch *charge) {
	class, ok := c.classes[ch.class]
	if !ok {
		return // counted once SetClass learns the class
	}
	ch.demand, ch.counted = class.Demand, true
	if p, ok := c.pools[ch.pool]; ok {
		p.used.Add(ch.demand)
	}
}

func (c *Cache) uncountLocked(ch *charge) {
	if !ch.counted {
		return
	}
	if p, ok := c.pools[ch.pool]; ok {
		p.used.Sub(ch.demand)
	}
	ch.counted = false
}
