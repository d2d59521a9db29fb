package index

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/cow"
)

// nsAddr is a pod address in a namespace (verified pod records).
type nsAddr struct {
	ns string
	ip netip.Addr
}

func hashNSAddr(k nsAddr) uint32 { return cow.Mix(cow.String(k.ns), cow.Addr(k.ip)) }
