// Package restart is the one restart policy of everything svcnet keeps
// running: the cluster supervisor's components, the node agent's service
// proxy and pods' containers. A process that dies is started again after
// a back-off that doubles with each quick death up to a ceiling, and
// starts over once the process has run healthily for a while, as
// kubelet's CrashLoopBackOff does.
package restart

import "time"

// Policy is a back-off: Initial doubling up to Max, back to Initial after
// a run of at least ResetAfter.
type Policy struct {
	Initial, Max, ResetAfter time.Duration
}

// Containers is kubelet's policy for containers: 10 s doubling to 5 min,
// reset after 10 min of running.
var Containers = Policy{Initial: 10 * time.Second, Max: 5 * time.Minute, ResetAfter: 10 * time.Minute}

// Components is the policy of svcnet's own processes (API server,
// controller manager, node agents, proxies, edge): they are the cluster,
// so they come back quickly: 1 s doubling to 30 s, reset after 1 min.
var Components = Policy{Initial: time.Second, Max: 30 * time.Second, ResetAfter: time.Minute}

// Backoff is the state of one restarted process.
type Backoff struct {
	Policy
	current time.Duration
}

// New starts a back-off of the policy.
func (p Policy) New() *Backoff { return &Backoff{Policy: p} }

// Exited records a run of ranFor that ended and returns how long to wait
// before the next start.
func (b *Backoff) Exited(ranFor time.Duration) time.Duration {
	switch {
	case b.current == 0 || ranFor >= b.ResetAfter:
		b.current = b.Initial
	default:
		b.current = min(b.current*2, b.Max)
	}
	return b.current
}

// Current is the wait the last Exited returned (0 before any).
func (b *Backoff) Current() time.Duration { return b.current }
