package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// memRecord is a Record as etcd keeps it: IPs created only once, each
// recording with an ID of its own, the node ports written only over the
// version they were read at.
type memRecord struct {
	mu       sync.Mutex
	ips      map[netip.Addr]IPRecord
	lastID   int
	ports    []byte
	suspects map[int]string
	version  int
	// conflicts counts the port updates that had to start over.
	conflicts int
	// writeHook runs between a port update's read and its write (to
	// let another server write first).
	writeHook func()
}

func newMemRecord() *memRecord { return &memRecord{ips: map[netip.Addr]IPRecord{}} }

func (r *memRecord) ClaimIP(_ context.Context, ip netip.Addr, o Owner) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ips[ip]; ok {
		return allocator.ErrAllocated
	}
	r.lastID++
	r.ips[ip] = IPRecord{Owner: o, ID: fmt.Sprint(r.lastID)}
	return nil
}

func (r *memRecord) FreeIP(_ context.Context, ip netip.Addr, rec IPRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if got, ok := r.ips[ip]; ok && got.Owner == rec.Owner && (rec.ID == "" || got.ID == rec.ID) {
		delete(r.ips, ip)
	}
	return nil
}

func (r *memRecord) ListIPs(context.Context) (map[netip.Addr]IPRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ips), nil
}

// ipOwner is who ip is recorded for; ok false when it is not recorded.
func (r *memRecord) ipOwner(ip string) (o Owner, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.ips[netip.MustParseAddr(ip)]
	return rec.Owner, ok
}

func (r *memRecord) UpdatePorts(_ context.Context, fn func(*NodePorts) error) error {
	for {
		r.mu.Lock()
		np := &NodePorts{Used: slices.Clone(r.ports), Suspects: maps.Clone(r.suspects)}
		if np.Suspects == nil {
			np.Suspects = map[int]string{}
		}
		version, hook := r.version, r.writeHook
		r.mu.Unlock()
		if err := fn(np); err != nil {
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
		r.ports, r.suspects, r.version = np.Used, np.Suspects, version+1
		r.mu.Unlock()
		return nil
	}
}

// setPorts marks ports allocated in the record, as a request of a
// server that then died would have left them.
func (r *memRecord) setPorts(t *testing.T, a *Allocators, ports ...int) {
	t.Helper()
	if err := r.UpdatePorts(context.Background(), func(np *NodePorts) error {
		p := a.Ports.Empty()
		p.Restore(np.Used)
		for _, port := range ports {
			if err := p.AllocatePort(port); err != nil {
				return err
			}
		}
		np.Used = p.Snapshot()
		return nil
	}); err != nil {
		t.Fatal(err)
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
		if got, _ := rec.ipOwner(s.Spec.ClusterIP); got != ownerOf(&s) {
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
		if err := rec.UpdatePorts(context.Background(), func(np *NodePorts) error {
			r := srv[0].Ports.Empty()
			r.Restore(np.Used)
			for p := 30000; p < 30100; p++ {
				_ = r.AllocatePort(p) // everything but what is there: all
			}
			r.ReleasePort(30042)
			np.Used = r.Snapshot()
			return nil
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
// before the record), and frees what no Service holds at the third
// repair in a row that finds it so — not before: the first findings may
// be a Service being created. Foreign IPAddresses are never freed.
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
	if o, _ := rec.ipOwner("10.96.0.20"); o != ownerOf(&old) || !rec.portsUsed(t, a)[30020] {
		t.Fatalf("repair did not record the stored Service's values: %v %v", rec.ips, rec.portsUsed(t, a))
	}
	// A leak: recorded for a Service that never got stored; and a
	// foreign IPAddress, never freed.
	const leakIP, foreign = "10.96.0.30", "10.96.0.31"
	if err := rec.ClaimIP(context.Background(), netip.MustParseAddr(leakIP), Owner{Namespace: "default", Name: "crashed"}); err != nil {
		t.Fatal(err)
	}
	if err := rec.ClaimIP(context.Background(), netip.MustParseAddr(foreign), Owner{Foreign: true}); err != nil {
		t.Fatal(err)
	}
	rec.setPorts(t, a, 30030)
	for repair := 1; repair <= leakRepairs+1; repair++ {
		if _, err := a.repairRecord(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantLeak := repair < leakRepairs
		_, ipThere := rec.ipOwner(leakIP)
		if ipThere != wantLeak || rec.portsUsed(t, a)[30030] != wantLeak {
			t.Errorf("repair %d: leaked IP recorded %v, port %v; want %v", repair, ipThere, rec.portsUsed(t, a)[30030], wantLeak)
		}
		if _, ok := rec.ipOwner(foreign); !ok {
			t.Errorf("repair %d freed a foreign IPAddress", repair)
		}
		if o, _ := rec.ipOwner("10.96.0.20"); o != ownerOf(&old) || !rec.portsUsed(t, a)[30020] {
			t.Errorf("repair %d freed a stored Service's values", repair)
		}
	}
	if len(rec.suspects) != 0 {
		t.Errorf("tokens left after the leak was freed: %v", rec.suspects)
	}
	// The local view follows the record: the foreign address is taken.
	if !a.IPs.HasIP(netip.MustParseAddr(foreign)) || a.IPs.HasIP(netip.MustParseAddr(leakIP)) {
		t.Error("the local view of cluster IPs is not the record's")
	}
}

// A value that looks leaked at one repair, and is freed and taken by a
// Service being created before the next, is a new recording: the count
// starts over, and the repairs that follow (which, counting by value,
// would have reached the third) leave it to its new holder, whether the
// free and the retake go through this API server or another. Once the
// Service is stored, it holds the value and nothing is counted.
func TestRepairSparesRetakenValue(t *testing.T) {
	for _, c := range []struct {
		name     string
		nodePort bool // the value is a node port, else a cluster IP
		retaker  int  // the server that frees and retakes it
	}{
		{"cluster IP", false, 0},
		{"cluster IP through another server", false, 1},
		{"node port", true, 0},
		{"node port through another server", true, 1},
	} {
		mutate := func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.40" }
		if c.nodePort {
			mutate = func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30040 }
		}
		t.Run(c.name, func(t *testing.T) {
			rec := newMemRecord()
			var stored []corev1.Service
			srv := servers(t, 2, rec, func() []corev1.Service { return slices.Clone(stored) })
			repair := func(n int) {
				t.Helper()
				if _, err := srv[0].repairRecord(context.Background()); err != nil {
					t.Fatalf("repair %d: %v", n, err)
				}
			}
			// A create in flight took the value; the first repair finds
			// it recorded and held by no Service.
			recorded := func(s *corev1.Service) bool {
				if c.nodePort {
					return rec.portsUsed(t, srv[0])[int(s.Spec.Ports[0].NodePort)]
				}
				o, ok := rec.ipOwner(s.Spec.ClusterIP)
				return ok && o == ownerOf(s)
			}
			first := svc(func(s *corev1.Service) { s.Name = "first"; mutate(s) })
			tx, err := srv[c.retaker].allocate(context.Background(), first, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			repair(1)
			// Its write fails: the value goes back, and a second create
			// takes it before the next repair.
			tx.rollback()
			second := svc(func(s *corev1.Service) { s.Name = "second"; mutate(s) })
			if _, err := srv[c.retaker].allocate(context.Background(), second, nil, false); err != nil {
				t.Fatalf("the freed value cannot be taken again: %v", err)
			}
			for n := 2; n <= leakRepairs; n++ {
				repair(n)
				if !recorded(second) {
					t.Fatalf("repair %d freed the value of the Service being created", n)
				}
			}
			stored = append(stored, *second)
			for n := leakRepairs + 1; n <= 2*leakRepairs; n++ {
				repair(n)
				if !recorded(second) {
					t.Fatalf("repair %d freed the stored Service's value", n)
				}
			}
			if len(srv[0].ipLeaks)+len(srv[0].portLeaks) != 0 || len(rec.suspects) != 0 {
				t.Errorf("a held value is still counted as leaked: %v %v, tokens %v", srv[0].ipLeaks, srv[0].portLeaks, rec.suspects)
			}
		})
	}
}

// Each server counts its own repairs: another server's repairs in
// between do not run down the grace, and do not reset it.
func TestRepairCountsPerServer(t *testing.T) {
	rec := newMemRecord()
	srv := servers(t, 2, rec, func() []corev1.Service { return nil })
	rec.setPorts(t, srv[0], 30050)
	for n := 1; n <= leakRepairs; n++ {
		if _, err := srv[1].repairRecord(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n < leakRepairs && !rec.portsUsed(t, srv[0])[30050] {
			t.Fatalf("freed after %d repairs of server 1", n)
		}
		if n == 1 {
			for range leakRepairs - 1 {
				if _, err := srv[0].repairRecord(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if !rec.portsUsed(t, srv[0])[30050] {
				t.Fatal("server 0's repairs freed the port after server 1 had counted one")
			}
		}
	}
	if rec.portsUsed(t, srv[0])[30050] {
		t.Error("the leaked port is still recorded after server 1's third repair")
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

func (f *failingPorts) UpdatePorts(ctx context.Context, fn func(*NodePorts) error) error {
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
