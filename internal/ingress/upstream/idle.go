package upstream

import "time"

// Idle keeps connections to pods between requests, by endpoint, the most
// recently used taken first (its pod most likely still has it open). It
// is not safe for concurrent use: the net/http path's client locks it,
// an event loop owns its own.
type Idle[C comparable] struct {
	max  int
	list map[string][]idle[C]
}

type idle[C comparable] struct {
	c    C
	used time.Time
}

// NewIdle keeps up to max connections per endpoint.
func NewIdle[C comparable](max int) *Idle[C] {
	return &Idle[C]{max: max, list: map[string][]idle[C]{}}
}

// Take returns the connection to addr used last, and when, if one is
// kept.
func (p *Idle[C]) Take(addr string) (C, time.Time, bool) {
	l := p.list[addr]
	if len(l) == 0 {
		var zero C
		return zero, time.Time{}, false
	}
	o := l[len(l)-1]
	if len(l) == 1 {
		delete(p.list, addr)
	} else {
		p.list[addr] = l[:len(l)-1]
	}
	return o.c, o.used, true
}

// Put keeps c, used last at now; false when addr has max already (the
// caller closes c).
func (p *Idle[C]) Put(addr string, c C, now time.Time) bool {
	l := p.list[addr]
	if len(l) >= p.max {
		return false
	}
	p.list[addr] = append(l, idle[C]{c, now})
	return true
}

// Remove forgets c, which the pod closed while it was idle.
func (p *Idle[C]) Remove(addr string, c C) {
	l := p.list[addr]
	for i, o := range l {
		if o.c == c {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(p.list, addr)
	} else {
		p.list[addr] = l
	}
}

// Expire removes the connections idle since before, or all with a zero
// before, calling drop on each.
func (p *Idle[C]) Expire(before time.Time, drop func(C)) {
	for addr, l := range p.list {
		keep := l[:0]
		for _, o := range l {
			if before.IsZero() || o.used.Before(before) {
				drop(o.c)
			} else {
				keep = append(keep, o)
			}
		}
		clear(l[len(keep):])
		if len(keep) == 0 {
			delete(p.list, addr)
		} else {
			p.list[addr] = keep
		}
	}
}

// Empty reports whether no connection is kept (an endpoint's list goes
// when its last connection does).
func (p *Idle[C]) Empty() bool { return len(p.list) == 0 }
