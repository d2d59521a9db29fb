package ebpf

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/bpflb"
)

// Format prints the table for people and golden files: the service
// entries by address, then each backend set.
func (t Table) Format() string {
	var b strings.Builder
	keys := slices.SortedFunc(maps.Keys(t.Keys), compareKeys)
	for _, k := range keys {
		fmt.Fprintf(&b, "service %s -> %s", k, t.Keys[k])
		if f := t.Flags[k]; f&bpflb.Masquerade != 0 {
			b.WriteString(" masquerade")
		}
		if f := t.Flags[k]; f&bpflb.Ranged != 0 {
			b.WriteString(" ranged")
		}
		b.WriteString("\n")
	}
	names := slices.SortedFunc(maps.Keys(t.Targets), func(a, b TargetName) int { return strings.Compare(a.String(), b.String()) })
	for _, n := range names {
		tg := t.Targets[n]
		fmt.Fprintf(&b, "target %s", n)
		if tg.Affinity > 0 {
			fmt.Fprintf(&b, " affinity=%ds", tg.Affinity)
		}
		if len(tg.Ranges) > 0 {
			fmt.Fprintf(&b, " sources=%v", tg.Ranges)
		}
		if len(tg.Backends) == 0 {
			switch tg.Verdict {
			case bpflb.Drop:
				b.WriteString(": drop (EPERM)\n")
			default:
				b.WriteString(": reject (ECONNREFUSED)\n")
			}
			continue
		}
		b.WriteString(":")
		for _, be := range tg.Backends {
			b.WriteString(" " + be.String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func compareKeys(a, b bpflb.ServiceKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if a.Proto != b.Proto {
		return int(a.Proto) - int(b.Proto)
	}
	return int(a.Scope) - int(b.Scope)
}
