package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// memRecord is a Record as etcd keeps it: IPs created only once, the
// node-port bitmap written only over the version it was read at.
type memRecord struct {
	mu      sync.Mutex
	ips     map[netip.Addr]Owner
	ports   []byte
	version int
	// conflicts counts the port updates that had to start over.
	conflicts int
	// writeHook runs between a port update's read and its write (to
	// let another server write first).
	writeHook func()
}

func newMemRecord() *memRecord { return &memRecord{ips: map[netip.Addr]Owner{}} }

func (r *memRecord) ClaimIP(_ context.Context, ip netip.Addr, o Owner) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ips[ip]; ok {
		return allocator.ErrAllocated
	}
	r.ips[ip] = o
	return nil
}

func (r *memRecord) FreeIP(_ context.Context, ip netip.Addr, o Owner) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ips[ip] == o {
		delete(r.ips, ip)
	}
	return nil
}

func (r *memRecord) ListIPs(context.Context) (map[netip.Addr]Owner, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[netip.Addr]Owner{}
	for k, v := range r.ips {
		out[k] = v
	}
	return out, nil
}

func (r *memRecord) UpdatePorts(_ context.Context, fn func([]byte) ([]byte, error)) error {
	for {
		r.mu.Lock()
		data, version := append([]byte(nil), r.ports...), r.version
		hook := r.writeHook
		r.mu.Unlock()
		next, err := fn(data)
		if err != nil {
			return err
		}
		if hook != nil {
			hook()
		}
		r.mu.Lock()
		if r.version != version {
			r.conflicts++
			r.mu.Unlock()
			continue
		}
		r.ports, r.version = next, version+1
		r.mu.Unlock()
		return nil
	}
}

func (r *memRecord) portsUsed(t *testing.T, a *Allocators) map[int]bool {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := a.Ports.Empty()
	p.Restore(r.ports)
	out := map[int]bool{}
	for port := p.Base(); p.Contains(port); port++ {
		if p.HasPort(port) {
			out[port] = true
		}
	}
	return out
}

// servers are API servers sharing one record, each with its own view.
func servers(t *testing.T, n int, rec *memRecord, stored func() []corev1.Service) []*Allocators {
	t.Helper()
	var out []*Allocators
	for range n {
		a, err := NewAllocators("10.96.0.0/24", "30000-30099")
		if err != nil {
			t.Fatal(err)
		}
		a.Record = rec
		a.List = func(context.Context) ([]corev1.Service, error) { return stored(), nil }
		out = append(out, a)
	}
	return out
}

// Three API servers allocating at once never give a value twice, and the
// record holds exactly what the Services hold.
func TestRecordSharedByServers(t *testing.T) {
	rec := newMemRecord()
	var mu sync.Mutex
	var stored []corev1.Service
	srv := servers(t, 3, rec, func() []corev1.Service { mu.Lock(); defer mu.Unlock(); return append([]corev1.Service(nil), stored...) })
	var wg sync.WaitGroup
	errs := make(chan error, 90)
	for i := range 90 {
		wg.Go(func() {
			s := svc(func(s *corev1.Service) { s.Name = fmt.Sprintf("s%d", i); s.Spec.Type = corev1.ServiceTypeNodePort })
			if _, err := srv[i%3].allocate(context.Background(), s, nil, false); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			stored = append(stored, *s)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ips, ports := map[string]string{}, map[int32]string{}
	for _, s := range stored {
		if o, dup := ips[s.Spec.ClusterIP]; dup {
			t.Errorf("cluster IP %s given to %s and %s", s.Spec.ClusterIP, o, s.Name)
		}
		ips[s.Spec.ClusterIP] = s.Name
		if o, dup := ports[s.Spec.Ports[0].NodePort]; dup {
			t.Errorf("node port %d given to %s and %s", s.Spec.Ports[0].NodePort, o, s.Name)
		}
		ports[s.Spec.Ports[0].NodePort] = s.Name
		if got := rec.ips[netip.MustParseAddr(s.Spec.ClusterIP)]; got != ownerOf(&s) {
			t.Errorf("%s recorded for %v, want %s", s.Spec.ClusterIP, got, s.Name)
		}
	}
	if len(rec.ips) != 90 || len(rec.portsUsed(t, srv[0])) != 90 {
		t.Errorf("record holds %d IPs and %d ports, want 90 each", len(rec.ips), len(rec.portsUsed(t, srv[0])))
	}
	t.Logf("%d port updates started over after another server's write", rec.conflicts)

	// A delete on one server frees the values for every server.
	victim := stored[0]
	srv[1].Release(context.Background(), &victim)
	if _, ok := rec.ips[netip.MustParseAddr(victim.Spec.ClusterIP)]; ok || rec.portsUsed(t, srv[0])[int(victim.Spec.Ports[0].NodePort)] {
		t.Error("the deleted Service's values are still recorded")
	}
	again := svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type = "again", corev1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.Ports[0].NodePort = victim.Spec.ClusterIP, victim.Spec.Ports[0].NodePort
	})
	// Server 2 still has them marked: the record decides.
	if _, err := srv[2].allocate(context.Background(), again, nil, false); err != nil {
		t.Errorf("another server cannot reuse the freed values: %v", err)
	}
}

// A value another server holds is refused even when this server's view
// has it free; a port update that another server overtook starts over on
// the new bitmap.
func TestRecordDecides(t *testing.T) {
	rec := newMemRecord()
	srv := servers(t, 2, rec, func() []corev1.Service { return nil })
	first := svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type, s.Spec.ClusterIP = "first", corev1.ServiceTypeNodePort, "10.96.0.50"
	})
	if _, err := srv[0].allocate(context.Background(), first, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mutate func(*corev1.Service)
	}{
		{"same cluster IP", func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.50" }},
		{"same node port", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, first.Spec.Ports[0].NodePort
		}},
	} {
		s := svc(func(s *corev1.Service) { s.Name = "second"; c.mutate(s) })
		if _, err := srv[1].allocate(context.Background(), s, nil, false); err == nil || !isStatus(err) {
			t.Errorf("%s: allocated on the other server (err %v)", c.name, err)
		}
	}
	// Nothing of the refused attempts stays recorded.
	if len(rec.ips) != 1 || len(rec.portsUsed(t, srv[0])) != 1 {
		t.Errorf("record: %v, ports %v", rec.ips, rec.portsUsed(t, srv[0]))
	}

	// Server 0 writes a port while server 1's update is between its read
	// and its write: server 1 starts over and takes another port.
	overtaken := false
	rec.writeHook = func() {
		if overtaken {
			return
		}
		overtaken = true
		rec.writeHook = nil
		if err := rec.UpdatePorts(context.Background(), func(used []byte) ([]byte, error) {
			r := srv[0].Ports.Empty()
			r.Restore(used)
			for p := 30000; p < 30100; p++ {
				_ = r.AllocatePort(p) // everything but what is there: all
			}
			r.ReleasePort(30042)
			return r.Snapshot(), nil
		}); err != nil {
			t.Error(err)
		}
	}
	s := svc(func(s *corev1.Service) { s.Name, s.Spec.Type = "third", corev1.ServiceTypeNodePort })
	if _, err := srv[1].allocate(context.Background(), s, nil, false); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Ports[0].NodePort != 30042 || rec.conflicts == 0 {
		t.Errorf("got node port %d after %d conflicts: want 30042, the only one left after the other server's write", s.Spec.Ports[0].NodePort, rec.conflicts)
	}
}

// A dry run records nothing.
func TestRecordDryRun(t *testing.T) {
	rec := newMemRecord()
	a := servers(t, 1, rec, func() []corev1.Service { return nil })[0]
	s := svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	tx, err := a.allocate(context.Background(), s, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.ips) != 0 || len(rec.portsUsed(t, a)) != 0 {
		t.Error("a dry run wrote to the record")
	}
	tx.rollback()
}

// The repair records what Services hold and the record lacks (data from
// before the record), and frees what no Service holds at two repairs in
// a row — not at the first, which may be a Service being created.
func TestRecordRepair(t *testing.T) {
	rec := newMemRecord()
	old := *svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type = "old", corev1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports[0].NodePort = "10.96.0.20", []string{"10.96.0.20"}, 30020
	})
	stored := []corev1.Service{old}
	a := servers(t, 1, rec, func() []corev1.Service { return stored })[0]
	if err := a.Repair(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.ips[netip.MustParseAddr("10.96.0.20")] != ownerOf(&old) || !rec.portsUsed(t, a)[30020] {
		t.Fatalf("repair did not record the stored Service's values: %v %v", rec.ips, rec.portsUsed(t, a))
	}
	// A leak: recorded for a Service that never got stored; and a
	// foreign IPAddress, never freed.
	leakIP, foreign := netip.MustParseAddr("10.96.0.30"), netip.MustParseAddr("10.96.0.31")
	rec.ips[leakIP] = Owner{Namespace: "default", Name: "crashed"}
	rec.ips[foreign] = Owner{Foreign: true}
	_ = rec.UpdatePorts(context.Background(), func(used []byte) ([]byte, error) {
		r := a.Ports.Empty()
		r.Restore(used)
		_ = r.AllocatePort(30030)
		return r.Snapshot(), nil
	})
	for round, wantLeak := range []bool{true, false} {
		svcs, _ := a.List(context.Background())
		if err := a.repairRecord(context.Background(), svcs, true); err != nil {
			t.Fatal(err)
		}
		_, ipThere := rec.ips[leakIP]
		if ipThere != wantLeak || rec.portsUsed(t, a)[30030] != wantLeak {
			t.Errorf("repair %d: leaked IP recorded %v, port %v; want %v", round+1, ipThere, rec.portsUsed(t, a)[30030], wantLeak)
		}
		if _, ok := rec.ips[foreign]; !ok {
			t.Errorf("repair %d freed a foreign IPAddress", round+1)
		}
		if rec.ips[netip.MustParseAddr("10.96.0.20")] != ownerOf(&old) || !rec.portsUsed(t, a)[30020] {
			t.Errorf("repair %d freed a stored Service's values", round+1)
		}
	}
	// The local view follows the record: the foreign address is taken.
	if !a.IPs.HasIP(foreign) || a.IPs.HasIP(leakIP) {
		t.Error("the local view of cluster IPs is not the record's")
	}
}

// A record that fails is a 500 for the request, and the request's other
// values are not left recorded.
func TestRecordFailure(t *testing.T) {
	rec := &failingPorts{memRecord: newMemRecord()}
	a, err := NewAllocators("10.96.0.0/24", "30000-30099")
	if err != nil {
		t.Fatal(err)
	}
	a.Record = rec
	a.List = func(context.Context) ([]corev1.Service, error) { return nil, nil }
	if err := a.Repair(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.fail = true
	s := svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	_, err = a.allocate(context.Background(), s, nil, false)
	if err == nil || !isStatus(err) {
		t.Fatalf("err %v, want a Status", err)
	}
	if len(rec.ips) != 0 {
		t.Errorf("the cluster IP stayed recorded: %v", rec.ips)
	}
}

type failingPorts struct {
	*memRecord
	fail bool
}

func (f *failingPorts) UpdatePorts(ctx context.Context, fn func([]byte) ([]byte, error)) error {
	if f.fail {
		return errors.New("etcdserver: request timed out")
	}
	return f.memRecord.UpdatePorts(ctx, fn)
}

// Review findings, kept as tests: a dry run checks the recorded node
// ports; a second create of the same Service with the same cluster IP
// (a retried request) is refused and its rollback leaves the first one's
// record alone; requested node ports of a LoadBalancer without
// allocated node ports are still taken.
func TestRecordEdges(t *testing.T) {
	rec := newMemRecord()
	srv := servers(t, 2, rec, func() []corev1.Service { return nil })
	first := svc(func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, "10.96.0.60", 30060
	})
	if _, err := srv[0].allocate(context.Background(), first, nil, false); err != nil {
		t.Fatal(err)
	}
	dry := svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type, s.Spec.Ports[0].NodePort = "dry", corev1.ServiceTypeNodePort, 30060
	})
	if _, err := srv[1].allocate(context.Background(), dry, nil, true); err == nil {
		t.Error("a dry run took a node port another server holds")
	}
	again := svc(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.60" }) // same name, same IP
	tx, err := srv[1].allocate(context.Background(), again, nil, false)
	if err == nil {
		tx.rollback()
		t.Error("a second create of the same Service took the recorded cluster IP")
	}
	if _, ok := rec.ips[netip.MustParseAddr("10.96.0.60")]; !ok {
		t.Error("the refused second create removed the first one's record")
	}
	lb := svc(func(s *corev1.Service) {
		s.Name, s.Spec.Type = "lb", corev1.ServiceTypeLoadBalancer
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		s.Spec.Ports[0].NodePort = 30070
	})
	if _, err := srv[0].allocate(context.Background(), lb, nil, false); err != nil {
		t.Fatal(err)
	}
	if !rec.portsUsed(t, srv[0])[30070] {
		t.Error("a LoadBalancer's requested node port is not recorded")
	}
}
