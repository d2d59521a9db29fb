package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
)

func TestNewPlan(t *testing.T) {
	p, err := NewPlan("demo", 3, "10.244.0.0/16", "10.96.0.0/12")
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := p.Node("node-2")
	if n2.IP.String() != "172.18.0.12" || n2.PodCIDR.String() != "10.244.2.0/24" || n2.PodGW.String() != "10.244.2.1" || n2.Netns != "svcnet-demo-node-2" {
		t.Errorf("node-2: %+v", n2)
	}
	for _, bad := range []struct {
		name          string
		nodes         int
		cluster, svcs string
	}{
		{"Bad_Name", 1, "10.244.0.0/16", "10.96.0.0/12"},
		{"demo", 0, "10.244.0.0/16", "10.96.0.0/12"},
		{"demo", 1, "10.244.0.0/24", "10.96.0.0/12"},
		{"demo", 1, "172.18.0.0/16", "10.96.0.0/12"},
		{"demo", 1, "10.0.0.0/8", "10.96.0.0/12"},
	} {
		if _, err := NewPlan(bad.name, bad.nodes, bad.cluster, bad.svcs); err == nil {
			t.Errorf("NewPlan(%+v) accepted", bad)
		}
	}
}

// TestBuildTopology builds a two-node cluster network and checks that the
// hosts reach each other over the underlay and nothing leaks out.
func TestBuildTopology(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
	name := fmt.Sprintf("t%d", rand.IntN(1e6))
	p, err := NewPlan(name, 2, "10.244.0.0/16", "10.96.0.0/12")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Destroy(name); err != nil {
			t.Error(err)
		}
		if left, _ := netns.List(p.Prefix()); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	if err := p.Build(); err != nil {
		t.Fatal(err)
	}
	if err := p.Build(); err != nil {
		t.Fatalf("building again: %v", err)
	}
	ping := func(from, to string) error {
		out, err := exec.Command("ip", "netns", "exec", from, "ping", "-c1", "-W1", to).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s -> %s: %v %s", from, to, err, out)
		}
		return nil
	}
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping is not installed")
	}
	for _, c := range []struct{ from, to string }{
		{p.ClientNetns(), p.Nodes[0].IP.String()},
		{p.Nodes[0].Netns, p.Nodes[1].IP.String()},
		{p.Nodes[0].Netns, p.Nodes[1].PodGW.String()}, // routed to the other node's pod bridge
		{p.EdgeNetns(), p.Gateway.String()},
	} {
		if err := ping(c.from, c.to); err != nil {
			t.Error(err)
		}
	}
	// The pod bridge keeps the address it was given, whatever ports join
	// it (left to choose, it takes the lowest of theirs).
	brMAC := func() string {
		out, _ := exec.Command("ip", "netns", "exec", p.Nodes[0].Netns, "cat", "/sys/class/net/"+PodBridge+"/address").CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	want := bridgeMAC(p.Nodes[0].PodGW).String()
	if got := brMAC(); got != want {
		t.Errorf("pod bridge address %s, want %s", got, want)
	}
	for _, argv := range [][]string{
		{"ip", "link", "add", "svcnet-tlow", "address", "02:00:00:00:00:01", "type", "veth", "peer", "name", "svcnet-tlowp"},
		{"ip", "link", "set", "svcnet-tlow", "master", PodBridge, "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", p.Nodes[0].Netns}, argv...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", argv, err, out)
		}
	}
	if got := brMAC(); got != want {
		t.Errorf("with a port of a lower address, the pod bridge's address is %s, want %s still", got, want)
	}
	fdb, _ := exec.Command("ip", "netns", "exec", p.Nodes[0].Netns, "bridge", "fdb", "show", "br", PodBridge).CombinedOutput()
	if !strings.Contains(string(fdb), want+" dev "+PodBridge+" ") {
		t.Errorf("the pod bridge's forwarding database has no entry of its own for %s:\n%s", want, fdb)
	}
	// Nothing routes out of the cluster.
	out, _ := exec.Command("ip", "netns", "exec", p.Nodes[0].Netns, "ip", "route").CombinedOutput()
	if strings.Contains(string(out), "default") {
		t.Errorf("a node has a default route:\n%s", out)
	}
}

func TestWithControlPlanes(t *testing.T) {
	tests := []struct {
		n       int
		wantErr bool
		wantAPI string
		wantCPs []string // name@address
	}{
		{1, false, "172.18.0.1:6443", nil},
		{3, false, "172.18.0.3:6443", []string{"cp-1@172.18.1.11", "cp-2@172.18.1.12", "cp-3@172.18.1.13"}},
		{0, true, "", nil},
		{2, true, "", nil},
		{4, true, "", nil},
		{9, true, "", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			p, err := NewPlan("demo", 2, "10.244.0.0/16", "10.96.0.0/12")
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.WithControlPlanes(tt.n)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if !strings.Contains(err.Error(), "odd number") {
					t.Errorf("error %q does not say what is accepted", err)
				}
				return
			}
			if got := p.APIAddress().String(); got != tt.wantAPI {
				t.Errorf("API address %s, want %s", got, tt.wantAPI)
			}
			var got []string
			for _, cp := range p.ControlPlanes {
				got = append(got, cp.Name+"@"+cp.IP.String())
				if cp.Netns != "svcnet-demo-"+cp.Name {
					t.Errorf("%s's namespace %s", cp.Name, cp.Netns)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantCPs, ",") || p.HA() != (tt.n > 1) {
				t.Errorf("control planes %v (HA %v), want %v", got, p.HA(), tt.wantCPs)
			}
		})
	}
}
