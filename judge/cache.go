package judge

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"strings"
	"sync"
)

type cacheKey [sha256.Size]byte

// keyOf identifies a request for the cache: the same rules firing on the
// same normalized call in the same task get the same verdict, whatever
// the episode. History is deliberately left out: chained discovery is a
// rule of its own, so a different history shows up as a different rule id.
func keyOf(req Request) cacheKey {
	ids := make([]string, 0, len(req.Flags))
	for _, f := range req.Flags {
		ids = append(ids, f.Rule)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	h := sha256.New()
	h.Write([]byte(req.TaskID))
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(ids, "\x1f")))
	h.Write([]byte{0})
	if req.Audit {
		h.Write([]byte("audit"))
	}
	h.Write([]byte{0})
	if len(req.Normalized) > 0 {
		h.Write(req.Normalized)
	} else {
		h.Write(req.Call) // no normalization: the raw call is all there is
	}
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// lru is a fixed-size verdict cache; safe for concurrent use.
type lru struct {
	mu    sync.Mutex
	size  int
	ll    *list.List                 // guarded by mu; front is newest
	items map[cacheKey]*list.Element // guarded by mu
}

type lruEntry struct {
	key cacheKey
	v   Verdict
}

func newLRU(size int) *lru {
	if size <= 0 {
		return nil
	}
	return &lru{size: size, ll: list.New(), items: make(map[cacheKey]*list.Element, size)}
}

func (c *lru) get(k cacheKey) (Verdict, bool) {
	if c == nil {
		return Verdict{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return Verdict{}, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*lruEntry).v, true
}

func (c *lru) put(k cacheKey, v Verdict) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry).v = v
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&lruEntry{key: k, v: v})
	if c.ll.Len() > c.size {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*lruEntry).key)
	}
}
