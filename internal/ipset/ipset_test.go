package ipset

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestTempName(t *testing.T) {
	for _, n := range []string{"KUBE-CLUSTER-IP", "KUBE-6-LOAD-BALANCER-SOURCE-CID"} {
		if tmp := tempName(n); len(tmp) > 31 || tmp == n {
			t.Errorf("tempName(%s) = %s", n, tmp)
		}
	}
}

// TestRunner writes sets in a network namespace of its own with the real
// ipset tool (this kernel has ip_set built in): created, replaced whole,
// read back, and destroyed; a bad entry fails the restore with ipset's
// words and leaves the old contents.
func TestRunner(t *testing.T) {
	ns := netnstest.New(t, "ipset")
	if _, err := exec.LookPath("ipset"); err != nil {
		t.Fatal("the ipset tool is missing (Debian package ipset; make test installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &Runner{Netns: ns}
	sets := []Set{
		{Name: "KUBE-CLUSTER-IP", Type: "hash:ip,port", Family: "inet", Comment: "cluster ips", Entries: []string{"10.96.0.10,tcp:80", "10.96.0.11,udp:53"}},
		{Name: "KUBE-NODE-PORT-TCP", Type: "bitmap:port", Entries: []string{"30080"}},
		{Name: "KUBE-LOOP-BACK", Type: "hash:ip,port,ip", Family: "inet", Entries: []string{"10.244.1.5,tcp:8080,10.244.1.5"}},
	}
	if err := r.Restore(ctx, sets); err != nil {
		t.Fatal(err)
	}
	sets[0].Entries = []string{"10.96.0.12,tcp:443"}
	if err := r.Restore(ctx, sets[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := r.Entries(ctx, "KUBE-CLUSTER-IP")
	if err != nil || !slices.Equal(got, []string{"10.96.0.12,tcp:443"}) {
		t.Errorf("after replacing: %v %v", got, err)
	}
	if got, _ := r.Entries(ctx, "KUBE-NODE-PORT-TCP"); !slices.Equal(got, []string{"30080"}) {
		t.Errorf("bitmap set: %v", got)
	}
	// Update touches only the entries named; deleting a missing one or
	// adding a present one is no error.
	err = r.Update(ctx, []Delta{
		{Name: "KUBE-CLUSTER-IP", Comment: "cluster ips", Add: []string{"10.96.0.13,udp:53", "10.96.0.12,tcp:443"}, Del: []string{"10.96.0.99,tcp:1"}},
		{Name: "KUBE-NODE-PORT-TCP", Add: []string{"30081"}, Del: []string{"30080"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Entries(ctx, "KUBE-CLUSTER-IP"); !slices.Equal(got, []string{"10.96.0.12,tcp:443", "10.96.0.13,udp:53"}) {
		t.Errorf("after an update: %v", got)
	}
	if got, _ := r.Entries(ctx, "KUBE-NODE-PORT-TCP"); !slices.Equal(got, []string{"30081"}) {
		t.Errorf("bitmap set after an update: %v", got)
	}
	if err := r.Update(ctx, []Delta{{Name: "KUBE-MISSING", Add: []string{"1"}}}); err == nil {
		t.Error("an update of a missing set succeeded")
	}
	if err := r.Restore(ctx, sets[:1]); err != nil {
		t.Fatal(err)
	}
	bad := Set{Name: "KUBE-CLUSTER-IP", Type: "hash:ip,port", Family: "inet", Entries: []string{"not-an-ip,tcp:80"}}
	if err := r.Restore(ctx, []Set{bad}); err == nil || !strings.Contains(err.Error(), "ipset restore") {
		t.Errorf("a bad entry: %v", err)
	}
	if got, _ := r.Entries(ctx, "KUBE-CLUSTER-IP"); !slices.Equal(got, []string{"10.96.0.12,tcp:443"}) {
		t.Errorf("a failed restore changed the set: %v", got)
	}
	if err := r.Destroy(ctx, "KUBE-CLUSTER-IP", "KUBE-NODE-PORT-TCP", "KUBE-LOOP-BACK", "KUBE-NONE"); err != nil {
		t.Fatal(err)
	}
	if names, err := r.List(ctx); err != nil || len(names) != 0 {
		t.Errorf("after destroy: %v %v", names, err)
	}
}
