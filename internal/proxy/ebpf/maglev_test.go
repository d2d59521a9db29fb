package ebpf

import (
	"fmt"
	"net/netip"
	"testing"
)

func backendsN(n int) []netip.AddrPort {
	var out []netip.AddrPort
	for i := range n {
		out = append(out, netip.MustParseAddrPort(fmt.Sprintf("10.244.%d.%d:8080", i/200, i%200+1)))
	}
	return out
}

// TestMaglevTable: every backend gets its share of the table, within a
// few entries; a backend leaving moves its own entries and few others;
// the table depends on the backends alone.
func TestMaglevTable(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 50} {
		t.Run(fmt.Sprint(n, " backends"), func(t *testing.T) {
			bs := backendsN(n)
			table := maglevTable(bs)
			count := make([]int, n)
			for _, s := range table {
				if int(s) >= n {
					t.Fatalf("slot %d of %d backends", s, n)
				}
				count[s]++
			}
			for i, c := range count {
				if share := MaglevSize / n; c < share-1 || c > share+1 {
					t.Errorf("backend %d has %d entries, want %d±1", i, c, share)
				}
			}
			if again := maglevTable(bs); fmt.Sprint(again) != fmt.Sprint(table) {
				t.Error("the same backends made another table")
			}
			if n < 3 {
				return
			}
			// The last but one leaves: entries of the others mostly stay.
			gone := n - 2
			rest := append(append([]netip.AddrPort{}, bs[:gone]...), bs[gone+1:]...)
			after := maglevTable(rest)
			moved, kept := 0, 0
			for i, s := range table {
				if int(s) == gone {
					continue
				}
				if rest[after[i]] != bs[s] {
					moved++
				} else {
					kept++
				}
			}
			if frac := float64(moved) / float64(moved+kept); frac > 0.2 {
				t.Errorf("%d of the %d entries of the staying backends moved (%.0f%%)", moved, moved+kept, frac*100)
			}
		})
	}
}
