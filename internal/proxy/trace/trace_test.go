package trace

import (
	"bytes"
	"math"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func load(t *testing.T) *Ruleset {
	t.Helper()
	data, err := os.ReadFile("testdata/kube-proxy-save.txt")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

type want struct {
	verdict string
	dst     string
	masq    bool
	p       float64
}

func check(t *testing.T, res *Result, wants []want) {
	t.Helper()
	got := res.Outcomes()
	if len(got) != len(wants) {
		t.Fatalf("outcomes = %+v, want %+v", got, wants)
	}
	total := 0.0
	for i, w := range wants {
		g := got[i]
		if g.Verdict != w.verdict || (w.dst != "" && g.Dst.String() != w.dst) || g.Masquerade != w.masq || math.Abs(g.Probability-w.p) > 1e-6 {
			t.Errorf("outcome %d = %+v, want %+v", i, g, w)
		}
		total += g.Probability
	}
	if math.Abs(total-1) > 1e-9 {
		t.Errorf("probabilities sum to %v", total)
	}
}

var node = Env{LocalAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}}

func TestKubeProxyDump(t *testing.T) {
	rs := load(t)
	cases := []struct {
		name  string
		pkt   Packet
		wants []want
	}{
		{"pod to cluster IP", Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"},
			[]want{{"ACCEPT", "10.244.1.2:8080", false, .5}, {"ACCEPT", "10.244.2.3:8080", false, .5}}},
		{"off-cluster client is masqueraded", Packet{Src: netip.MustParseAddr("192.168.1.99"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"},
			[]want{{"ACCEPT", "10.244.1.2:8080", true, .5}, {"ACCEPT", "10.244.2.3:8080", true, .5}}},
		{"hairpin", Packet{Src: netip.MustParseAddr("10.244.1.2"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"},
			[]want{{"ACCEPT", "10.244.1.2:8080", true, .5}, {"ACCEPT", "10.244.2.3:8080", false, .5}}},
		{"node itself", Packet{Src: netip.MustParseAddr("192.168.1.10"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp", Local: true},
			[]want{{"ACCEPT", "10.244.1.2:8080", true, .5}, {"ACCEPT", "10.244.2.3:8080", true, .5}}},
		{"wrong protocol is not a service", Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "udp"},
			[]want{{"ACCEPT", "10.96.0.10:80", false, 1}}}, // routed on, untranslated
		{"service without endpoints", Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.20:80"), Proto: "tcp"},
			[]want{{"REJECT", "", false, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, Trace(rs, c.pkt, node), c.wants)
		})
	}
}

func TestUnsupportedIsReported(t *testing.T) {
	res := Trace(load(t), Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"}, node)
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "-o") {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

func TestWrite(t *testing.T) {
	res := Trace(load(t), Packet{Src: netip.MustParseAddr("192.168.1.99"), SrcPort: 40000, Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"}, node)
	var b bytes.Buffer
	if err := res.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"packet 192.168.1.99:40000 -> 10.96.0.10:80/tcp, arriving at the node",
		"path 1 of 2, probability 50.00%:",
		"  nat KUBE-SVC-XXXXXXXXXXXXXXXX\n",
		"[random 0.5: taken]",
		"path 2 of 2, probability 50.00%, as path 1 for",
		"[random 0.5: not taken]",
		"=> delivered to 10.244.2.3:8080 (DNAT), masqueraded",
		"   50.00%  delivered to 10.244.1.2:8080 (DNAT), masqueraded",
		"filter KUBE-FORWARD",
		"nat KUBE-POSTROUTING",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if testing.Verbose() {
		t.Log("\n" + out)
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"-A FOO -j ACCEPT\n",
		"*nat\n-A FOO --comment \"unterminated\n",
		"*nat\nbogus\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestRedirect(t *testing.T) {
	rs, err := Parse([]byte(`*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 36001
-A OUTPUT -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 36001
COMMIT
`))
	if err != nil {
		t.Fatal(err)
	}
	in := Trace(rs, Packet{Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp"}, node)
	out := Trace(rs, Packet{Src: netip.MustParseAddr("192.168.1.10"), Dst: netip.MustParseAddrPort("10.96.0.10:80"), Proto: "tcp", Local: true}, node)
	if o := in.Outcomes(); len(o) != 1 || o[0].Dst.String() != "192.168.1.10:36001" {
		t.Errorf("prerouting: %+v", o)
	}
	if o := out.Outcomes(); len(o) != 1 || o[0].Dst.String() != "127.0.0.1:36001" {
		t.Errorf("output: %+v", o)
	}
}

func TestParseOddities(t *testing.T) {
	rs, err := Parse([]byte(`*nat
:PREROUTING ACCEPT [0:0]
:X - [0:0]
[5:300] -A PREROUTING -p udp -m udp --dport 50:60 -j X
-A X -m statistic --mode nth --every 2 -j DNAT --to-destination 10.0.0.1:1
-A X -j DNAT --to-destination [fd00::1]:53
-A X -m mark --mark 0x1 -g Y
COMMIT
`))
	if err != nil {
		t.Fatal(err)
	}
	x := rs.Tables["nat"].Chains["X"]
	if len(x.Rules) != 3 || len(x.Rules[0].Unsupported) == 0 || !x.Rules[2].Goto {
		t.Fatalf("rules = %+v", x.Rules)
	}
	res := Trace(rs, Packet{Src: netip.MustParseAddr("10.0.0.9"), Dst: netip.MustParseAddrPort("10.96.0.1:55"), Proto: "udp"}, Env{})
	if o := res.Outcomes(); len(o) != 1 || o[0].Dst.String() != "[fd00::1]:53" {
		t.Errorf("outcomes = %+v", o)
	}
}
