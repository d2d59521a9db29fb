package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		pgrp       int
		ticks, rss uint64
		wantErr    bool
	}{
		{"plain", "1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 500 2654208 212 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
			1234, 10, 212, false},
		{"a name with spaces and parentheses", "77 (a (b) c) R 1 70 70 0 -1 0 0 0 0 0 150 50 0 0 20 0 1 0 9 100 9 0",
			70, 200, 9, false},
		{"no name", "77 R 1", 0, 0, 0, true},
		{"cut short", "77 (x) R 1 70", 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ticks, rss, err := ParseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (g != tc.pgrp || ticks != tc.ticks || rss != tc.rss) {
				t.Errorf("got group %d, %d ticks, %d pages; want %d, %d, %d", g, ticks, rss, tc.pgrp, tc.ticks, tc.rss)
			}
		})
	}
}

// TestGroups sums the processes of a fake /proc by group and skips what
// is not a process.
func TestGroups(t *testing.T) {
	dir := t.TempDir()
	write := func(pid, stat string) {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "10 (sh) S 1 10 10 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 9 100 4 0")
	write("11", "11 (curl) S 10 10 10 0 -1 0 0 0 0 0 50 50 0 0 20 0 1 0 9 100 6 0")
	write("20", "20 (other) S 1 20 20 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 9 100 1 0")
	write("self", "not a process")
	g, err := Groups(dir)
	if err != nil {
		t.Fatal(err)
	}
	page := uint64(os.Getpagesize())
	if want := (Usage{CPUNanoSeconds: 2 * uint64(time.Second), MemoryBytes: 10 * page}); g[10] != want {
		t.Errorf("group 10: %+v, want %+v", g[10], want)
	}
	if len(g) != 2 {
		t.Errorf("groups %v, want 10 and 20", g)
	}
}

func TestNanoCores(t *testing.T) {
	for _, tc := range []struct {
		prev, cur uint64
		d         time.Duration
		want      uint64
	}{
		{0, uint64(time.Second), 2 * time.Second, 5e8}, // half a core
		{uint64(time.Second), 0, time.Second, 0},       // restarted
		{0, uint64(time.Second), 0, 0},                 // no interval
		{0, 3 * uint64(time.Second), time.Second, 3e9}, // three cores
	} {
		if got := NanoCores(Usage{CPUNanoSeconds: tc.prev}, Usage{CPUNanoSeconds: tc.cur}, tc.d); got != tc.want {
			t.Errorf("NanoCores(%d→%d over %s) = %d, want %d", tc.prev, tc.cur, tc.d, got, tc.want)
		}
	}
}
