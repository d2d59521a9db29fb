package controller

import (
	"sync"
	"time"
)

// expectationsTTL bounds how long unobserved writes block a key, in case
// an event was lost.
const expectationsTTL = 5 * time.Minute

// Expectations remember the creations and deletions a controller made and
// has not yet seen in its informer cache. A controller acts on a key only
// when its expectations are satisfied, so it never counts a stale cache
// and creates or deletes twice. Deletions are tracked by name, because a
// pod is seen going twice (marked for deletion, then gone).
type Expectations struct {
	mu sync.Mutex
	m  map[string]*expectation
}

type expectation struct {
	adds int
	dels map[string]bool
	at   time.Time
}

// NewExpectations returns empty expectations.
func NewExpectations() *Expectations { return &Expectations{m: map[string]*expectation{}} }

func (e *Expectations) get(key string) *expectation {
	x := e.m[key]
	if x == nil {
		x = &expectation{dels: map[string]bool{}}
		e.m[key] = x
	}
	return x
}

// ExpectCreations records that n objects are being created for key.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.get(key)
	x.adds += n
	x.at = time.Now()
}

// ExpectDeletions records that the named objects are being deleted.
func (e *Expectations) ExpectDeletions(key string, names ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.get(key)
	for _, n := range names {
		x.dels[n] = true
	}
	x.at = time.Now()
}

// CreationObserved lowers the creations expected for key by one (also
// used when a creation failed).
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil && x.adds > 0 {
		x.adds--
	}
}

// DeletionObserved notes that the named object is gone or going.
func (e *Expectations) DeletionObserved(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.m[key]; x != nil {
		delete(x.dels, name)
	}
}

// Satisfied reports whether everything expected for key has been seen.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[key]
	return x == nil || (x.adds <= 0 && len(x.dels) == 0) || time.Since(x.at) > expectationsTTL
}

// Forget drops what is expected for key.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
