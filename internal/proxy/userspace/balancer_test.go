package userspace

import (
	"net/netip"
	"testing"
	"time"
)

func TestBalancer(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	eps := []string{"e1", "e2", "e3"}
	type pick struct {
		client  netip.Addr
		after   time.Duration // clock advance before the pick
		tried   []string
		want    string
		wantNot bool
	}
	cases := []struct {
		name     string
		affinity time.Duration
		eps      []string
		picks    []pick
	}{
		{name: "round robin over clients", eps: eps, picks: []pick{
			{client: a, want: "e1"}, {client: a, want: "e2"}, {client: b, want: "e3"}, {client: a, want: "e1"}}},
		{name: "a failed endpoint is skipped", eps: eps, picks: []pick{
			{client: a, tried: []string{"e1"}, want: "e2"}, {client: a, tried: []string{"e3", "e1"}, want: "e2"},
			{client: a, tried: eps, wantNot: true}}},
		{name: "affinity keeps a client on its endpoint", affinity: 10 * time.Second, eps: eps, picks: []pick{
			{client: a, want: "e1"}, {client: b, want: "e2"}, {client: a, after: 5 * time.Second, want: "e1"},
			{client: b, want: "e2"}}},
		{name: "affinity expires", affinity: 10 * time.Second, eps: eps, picks: []pick{
			{client: a, want: "e1"}, {client: a, after: 11 * time.Second, want: "e2"}}},
		{name: "affinity gives way when its endpoint fails", affinity: time.Hour, eps: eps, picks: []pick{
			{client: a, want: "e1"}, {client: a, tried: []string{"e1"}, want: "e2"}, {client: a, want: "e2"}}},
		{name: "no endpoints", eps: nil, picks: []pick{{client: a, wantNot: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			bal := newBalancer(func() time.Time { return now })
			bal.update(tc.eps, tc.affinity)
			for i, p := range tc.picks {
				now = now.Add(p.after)
				tried := map[string]bool{}
				for _, e := range p.tried {
					tried[e] = true
				}
				got, ok := bal.pick(p.client, tried)
				if ok == p.wantNot || got != p.want {
					t.Errorf("pick %d: got %q %v, want %q", i, got, ok, p.want)
				}
			}
		})
	}
}

func TestBalancerUpdateKeepsWhatRemains(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	bal := newBalancer(time.Now)
	bal.update([]string{"e1", "e2", "e3"}, time.Hour)
	if ep, _ := bal.pick(a, nil); ep != "e1" {
		t.Fatal(ep)
	}
	if ep, _ := bal.pick(b, nil); ep != "e2" {
		t.Fatal(ep)
	}
	// e2 goes: b is re-balanced, a stays.
	bal.update([]string{"e1", "e3"}, time.Hour)
	if ep, _ := bal.pick(a, nil); ep != "e1" {
		t.Errorf("a moved to %s", ep)
	}
	if ep, _ := bal.pick(b, nil); ep == "e2" {
		t.Errorf("b still on removed endpoint")
	}
}
