package proxy

import "github.com/svcnet/svcnet/internal/svcstate"

// SyncResult is what a mode reports after a sync that brought the kernel
// in line with a snapshot, for the work that must follow the rules rather
// than precede them: conntrack cleanup, health-check servers.
type SyncResult struct {
	// Previous is the snapshot the kernel matched before, nil before the
	// first sync; Current the one it matches now.
	Previous, Current *svcstate.Snapshot
	// Changed holds the service ports whose rules may differ between the
	// two (every port on a first sync).
	Changed map[svcstate.ServicePortName]struct{}
}
