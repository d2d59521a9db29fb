package node

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/node/hostports"
)

// hostPortTable is every pod's hostPorts on this node, and what programs
// them: the node's own nat table, through the same iptables (binary,
// backend, lock) as its service proxy.
type hostPortTable struct {
	mu      sync.Mutex
	byPod   map[types.UID][]hostports.Mapping
	chained bool // the jumps to the chains are in place
}

// SetHostPorts records a pod's hostPorts (none: forget the pod) and
// rewrites the chains when they changed.
func (a *Agent) SetHostPorts(uid types.UID, ms []hostports.Mapping) error {
	t := &a.hostPorts
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byPod[uid]; ok && slices.Equal(old, ms) {
		return nil
	}
	if len(ms) == 0 {
		if _, ok := t.byPod[uid]; !ok {
			return nil
		}
		delete(t.byPod, uid)
	} else {
		if t.byPod == nil {
			t.byPod = map[types.UID][]hostports.Mapping{}
		}
		t.byPod[uid] = ms
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex := &iptables.Exec{Binary: cmp.Or(a.cfg.IPTablesBinary, "iptables")}
	if !t.chained {
		for _, c := range []string{hostports.Chain, hostports.MasqChain} {
			if err := ex.EnsureChain(ctx, "nat", c); err != nil {
				return err
			}
		}
		for _, j := range hostports.Jumps() {
			if err := ex.EnsureRule(ctx, "nat", j[0], j[1:]...); err != nil {
				return err
			}
		}
		t.chained = true
	}
	var all []hostports.Mapping
	for _, uid := range slices.Sorted(maps.Keys(t.byPod)) {
		all = append(all, t.byPod[uid]...)
	}
	return ex.Restore(ctx, []byte(hostports.Rules(all)))
}
