package cow

import (
	"fmt"
	"maps"
	"testing"
)

// TestFreeze writes a map through several freezes, some changing
// a few keys and some most of its 512 shards, and checks that each
// frozen map keeps exactly what it held and the live map what was
// written last.
func TestFreeze(t *testing.T) {
	m := New[string, int](16, 32, String)
	want := map[string]int{}
	type frozen struct {
		m    Map[string, int]
		want map[string]int
	}
	var kept []frozen
	for round, keys := range []int{1, 3, 1000, 2, 0, 500, 1000, 1} {
		for i := range keys {
			k := fmt.Sprint("k", (i*7+round)%600)
			if i%5 == 4 {
				m.Delete(k)
				delete(want, k)
				continue
			}
			m.Set(k, round*1000+i)
			want[k] = round*1000 + i
		}
		kept = append(kept, frozen{m.Freeze(), maps.Clone(want)})
	}
	kept = append(kept, frozen{m, want})
	for i, f := range kept {
		got := map[string]int{}
		for k, v := range f.m.All {
			got[k] = v
		}
		if !maps.Equal(got, f.want) || f.m.Len() != len(f.want) {
			t.Errorf("freeze %d holds %d entries, want %d (or different values)", i, len(got), len(f.want))
		}
		for k, v := range f.want {
			if g, ok := f.m.Get(k); !ok || g != v {
				t.Errorf("freeze %d: get(%s) = %d, %v; want %d", i, k, g, ok, v)
			}
		}
	}
}
