package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// leakRepairs is how many repairs in a row must find a recorded value
// held by no Service before it is freed, as kube-apiserver's repair
// controllers count (numRepairsBeforeLeakCleanup). A Service being
// created holds its values before it is stored, so one finding proves
// nothing; at the default interval of 3 minutes a value is freed 6
// minutes after it was first found, at the earliest, far longer than a
// request lives.
const leakRepairs = 3

// ipLeak is one recording of a cluster IP that repairs found held by no
// Service; portLeak is a node port so found, with the token of the
// finding that the record keeps.
type (
	ipLeak struct {
		ip netip.Addr
		id string
	}
	portLeak struct {
		port  int
		token string
	}
)

// RunRepair repairs the record every interval until ctx ends, as
// kube-apiserver's repair controllers do on every API server: values
// that Services hold but the record lacks are recorded (a write lost in
// a crash, data from before the record existed), and recorded values
// that no Service holds are freed after leakRepairs repairs in a row
// (a Service whose create failed after its values were recorded, by a
// server that died before undoing them).
func (a *Allocators) RunRepair(ctx context.Context, interval time.Duration) {
	if a.Record == nil || a.List == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, err := a.repairRecord(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			slog.Warn("repair service allocations", "err", err)
		case err == nil && sum.changed():
			sum.log()
		}
	}
}

// repairSummary is what one repair found and changed.
type repairSummary struct {
	services, clusterIPs                     int
	ipsRecorded, ipsFreed                    int
	portsRecorded, portsFreed, suspectedLeak int
}

func (s repairSummary) changed() bool {
	return s.ipsRecorded+s.ipsFreed+s.portsRecorded+s.portsFreed > 0
}

func (s repairSummary) log() {
	slog.Info("service allocations repaired", "services", s.services, "clusterIPs", s.clusterIPs,
		"recorded", s.ipsRecorded, "freed", s.ipsFreed, "nodePortsRecorded", s.portsRecorded,
		"nodePortsFreed", s.portsFreed, "suspectedLeaks", s.suspectedLeak)
}

// repairRecord is one repair: it brings the record in line with the
// Services. What they hold and the record lacks is recorded; what the
// record holds and no Service does is freed when leakRepairs repairs in
// a row have found it so, provided it was the same recording all along
// (the IPAddress's UID, the node port's token). A value freed and taken
// again between two repairs is a new recording, whose count starts
// over: it is never freed under its new holder on the strength of what
// the old one did.
//
// The record is read before the Services are listed, and the node ports
// are written only over the bitmap that was read (leaked IPs are freed
// only if still the recording that was read): a value recorded when
// read and held by no Service listed afterwards is leaked, or is held
// by a Service being created at that moment, which the count waits
// for.
func (a *Allocators) repairRecord(ctx context.Context) (repairSummary, error) {
	a.repairMu.Lock()
	defer a.repairMu.Unlock()
	var sum repairSummary
	recorded, err := a.Record.ListIPs(ctx)
	if err != nil {
		return sum, fmt.Errorf("list IPAddresses: %w", err)
	}
	var svcs []corev1.Service
	var listErr error
	var freedPorts []int
	portLeaks := map[portLeak]int{}
	err = a.Record.UpdatePorts(ctx, func(np *NodePorts) error {
		if svcs, listErr = a.List(ctx); listErr != nil {
			return listErr
		}
		clear(portLeaks)
		var err error
		sum.portsRecorded, freedPorts, err = a.repairPorts(np, svcs, portLeaks)
		return err
	})
	switch {
	case listErr != nil:
		return sum, fmt.Errorf("list Services: %w", listErr)
	case err != nil && !errors.Is(err, errNoPorts):
		return sum, fmt.Errorf("repair node ports: %w", err)
	}
	if len(freedPorts) > 0 {
		slog.Info("freed leaked node ports", "ports", freedPorts, "repairs", leakRepairs)
	}
	sum.services, sum.portsFreed = len(svcs), len(freedPorts)

	heldIPs := map[netip.Addr]Owner{}
	for i := range svcs {
		svc := &svcs[i]
		for _, v := range usedValues(svc) {
			if !v.ip.IsValid() || !a.IPs.Contains(v.ip) {
				continue
			}
			if o, dup := heldIPs[v.ip]; dup && o != ownerOf(svc) {
				slog.Warn("service cluster IP allocated twice", "ip", v.ip, "services", []string{o.Namespace + "/" + o.Name, svc.Namespace + "/" + svc.Name})
			}
			heldIPs[v.ip] = ownerOf(svc)
		}
	}
	for ip, o := range heldIPs {
		if got, ok := recorded[ip]; ok {
			if got.Owner != o {
				slog.Warn("cluster IP recorded for another Service", "ip", ip, "service", o.Namespace+"/"+o.Name, "recorded", got.Owner.Namespace+"/"+got.Owner.Name)
			}
			continue
		}
		switch err := a.Record.ClaimIP(ctx, ip, o); {
		case err == nil:
			recorded[ip] = IPRecord{Owner: o}
			sum.ipsRecorded++
		case errors.Is(err, allocator.ErrAllocated):
		default:
			return sum, fmt.Errorf("record cluster IP %s of %s/%s: %w", ip, o.Namespace, o.Name, err)
		}
	}
	ipLeaks := map[ipLeak]int{}
	for ip, rec := range recorded {
		// A recording held by some Service is no leak, even under
		// another owner: freeing it would free what a Service holds.
		if _, held := heldIPs[ip]; held || rec.Owner.Foreign || !a.IPs.Contains(ip) {
			continue // (outside the range: another ServiceCIDR's)
		}
		k := ipLeak{ip: ip, id: rec.ID}
		n := a.ipLeaks[k] + 1
		if n < leakRepairs {
			ipLeaks[k] = n
			continue
		}
		if err := a.Record.FreeIP(ctx, ip, rec); err != nil {
			ipLeaks[k] = n
			slog.Warn("free leaked cluster IP", "ip", ip, "err", err)
			continue
		}
		slog.Info("freed leaked cluster IP", "ip", ip, "recordedFor", rec.Owner.Namespace+"/"+rec.Owner.Name, "repairs", n)
		delete(recorded, ip)
		sum.ipsFreed++
	}
	// The counts move only with a whole repair: repairs that fail and
	// are retried at once must not run down the grace.
	a.ipLeaks, a.portLeaks = ipLeaks, portLeaks
	sum.suspectedLeak = len(ipLeaks) + len(portLeaks)
	sum.clusterIPs = len(recorded)
	a.setLocalIPs(recorded)
	return sum, nil
}

// repairPorts is the node-port half of a repair, on the recorded state
// np, changed in place: the ports svcs hold are allocated; an allocated
// port that none holds gets a token if it has none, and is freed at the
// leakRepairs-th repair in a row that finds it with the same token;
// tokens of ports held or free are dropped. leaks gets the ports found
// leaked and not freed, with their counts. errNoPorts: nothing to write.
func (a *Allocators) repairPorts(np *NodePorts, svcs []corev1.Service, leaks map[portLeak]int) (recorded int, freed []int, err error) {
	held := map[int]bool{}
	for i := range svcs {
		for _, v := range usedValues(&svcs[i]) {
			if !v.ip.IsValid() && a.Ports.Contains(v.port) {
				held[v.port] = true
			}
		}
	}
	r := a.Ports.Empty()
	r.Restore(np.Used)
	for p := range held {
		if r.AllocatePort(p) == nil {
			recorded++
		}
	}
	changed := false
	for p := range np.Suspects {
		if held[p] || !r.HasPort(p) {
			delete(np.Suspects, p)
			changed = true
		}
	}
	for p := a.Ports.Base(); a.Ports.Contains(p); p++ {
		if held[p] || !r.HasPort(p) {
			continue
		}
		token, ok := np.Suspects[p]
		if !ok {
			token = strconv.FormatUint(rand.Uint64(), 36)
			np.Suspects[p] = token
			changed = true
		}
		k := portLeak{port: p, token: token}
		n := a.portLeaks[k] + 1
		if n < leakRepairs {
			leaks[k] = n
			continue
		}
		r.ReleasePort(p)
		delete(np.Suspects, p)
		freed = append(freed, p)
	}
	if recorded == 0 && len(freed) == 0 && !changed {
		return 0, nil, errNoPorts
	}
	np.Used = r.Snapshot()
	return recorded, freed, nil
}

// resyncIPs makes the local bitmap of cluster IPs the record's.
func (a *Allocators) resyncIPs(ctx context.Context) error {
	recorded, err := a.Record.ListIPs(ctx)
	if err != nil {
		return fmt.Errorf("list IPAddresses: %w", err)
	}
	a.setLocalIPs(recorded)
	return nil
}

// setLocalIPs makes the local bitmap of cluster IPs hold what is recorded.
func (a *Allocators) setLocalIPs(recorded map[netip.Addr]IPRecord) {
	var offs []int
	for ip := range recorded {
		if off, ok := a.IPs.Offset(ip); ok {
			offs = append(offs, off)
		}
	}
	a.IPs.Reset(offs)
}
