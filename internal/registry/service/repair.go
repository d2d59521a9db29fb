package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// RunRepair repairs the record every interval until ctx ends, as
// kube-apiserver's repair controllers do on every API server: values
// that Services hold but the record lacks are recorded (a write lost in
// a crash, data from before the record existed), and recorded values
// that no Service holds at two repairs in a row are freed (a Service
// whose create failed after its values were recorded, by a server that
// died before undoing them).
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
		svcs, err := a.List(ctx)
		if err == nil {
			err = a.repairRecord(ctx, svcs, true)
		}
		if err != nil && ctx.Err() == nil {
			slog.Warn("repair service allocations", "err", err)
		}
	}
}

// repairRecord brings the record in line with the Services: what they
// hold is recorded; with freeLeaks, what none holds twice in a row is
// freed. The local bitmap of cluster IPs is then the record's.
func (a *Allocators) repairRecord(ctx context.Context, svcs []corev1.Service, freeLeaks bool) error {
	// The record is read after the Services were listed: a value
	// recorded in between is held by no listed Service and looks leaked
	// once; freeing only at the second sighting leaves it to the Service
	// being created.
	recorded, err := a.Record.ListIPs(ctx)
	if err != nil {
		return fmt.Errorf("list IPAddresses: %w", err)
	}
	heldIPs := map[netip.Addr]Owner{}
	heldPorts := map[int]Owner{}
	for i := range svcs {
		svc := &svcs[i]
		for _, v := range usedValues(svc) {
			switch {
			case v.ip.IsValid() && a.IPs.Contains(v.ip):
				if o, dup := heldIPs[v.ip]; dup && o != ownerOf(svc) {
					slog.Warn("service cluster IP allocated twice", "ip", v.ip, "services", []string{o.Namespace + "/" + o.Name, svc.Namespace + "/" + svc.Name})
				}
				heldIPs[v.ip] = ownerOf(svc)
			case !v.ip.IsValid() && a.Ports.Contains(v.port):
				heldPorts[v.port] = ownerOf(svc)
			}
		}
	}
	var added, freed int
	for ip, o := range heldIPs {
		if got, ok := recorded[ip]; ok {
			if got != o {
				slog.Warn("cluster IP recorded for another Service", "ip", ip, "service", o.Namespace+"/"+o.Name, "recorded", got.Namespace+"/"+got.Name)
			}
			continue
		}
		switch err := a.Record.ClaimIP(ctx, ip, o); {
		case err == nil:
			recorded[ip] = o
			added++
		case errors.Is(err, allocator.ErrAllocated):
		default:
			return fmt.Errorf("record cluster IP %s of %s/%s: %w", ip, o.Namespace, o.Name, err)
		}
	}
	a.leakMu.Lock()
	prevIPs := a.ipLeaks
	a.ipLeaks = map[netip.Addr]bool{}
	for ip, o := range recorded {
		if h, ok := heldIPs[ip]; (ok && h == o) || o.Foreign {
			continue
		}
		if !a.IPs.Contains(ip) {
			continue // another ServiceCIDR's: not this allocator's
		}
		if !freeLeaks || !prevIPs[ip] {
			a.ipLeaks[ip] = true
			continue
		}
		if err := a.Record.FreeIP(ctx, ip, o); err != nil {
			a.ipLeaks[ip] = true
			slog.Warn("free leaked cluster IP", "ip", ip, "err", err)
			continue
		}
		delete(recorded, ip)
		freed++
	}
	a.leakMu.Unlock()
	a.setLocalIPs(recorded)

	var portsAdded, portsFreed int
	a.leakMu.Lock()
	prevPorts := a.portLeak
	a.leakMu.Unlock()
	leaks := map[int]bool{}
	err = a.Record.UpdatePorts(ctx, func(used []byte) ([]byte, error) {
		portsAdded, portsFreed = 0, 0
		clear(leaks)
		r := a.Ports.Empty()
		r.Restore(used)
		for p := range heldPorts {
			if r.AllocatePort(p) == nil {
				portsAdded++
			}
		}
		for p := a.Ports.Base(); a.Ports.Contains(p); p++ {
			if _, held := heldPorts[p]; held || !r.HasPort(p) {
				continue
			}
			if freeLeaks && prevPorts[p] {
				r.ReleasePort(p)
				portsFreed++
				continue
			}
			leaks[p] = true
		}
		if portsAdded == 0 && portsFreed == 0 {
			return nil, errNoPorts
		}
		return r.Snapshot(), nil
	})
	if err != nil && !errors.Is(err, errNoPorts) {
		return fmt.Errorf("repair node ports: %w", err)
	}
	a.leakMu.Lock()
	a.portLeak = leaks
	a.leakMu.Unlock()
	if added+freed+portsAdded+portsFreed > 0 || !freeLeaks {
		slog.Info("service allocations repaired", "services", len(svcs), "clusterIPs", len(recorded), "recorded", added, "freed", freed,
			"nodePortsRecorded", portsAdded, "nodePortsFreed", portsFreed)
	}
	return nil
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
func (a *Allocators) setLocalIPs(recorded map[netip.Addr]Owner) {
	var offs []int
	for ip := range recorded {
		if off, ok := a.IPs.Offset(ip); ok {
			offs = append(offs, off)
		}
	}
	a.IPs.Reset(offs)
}
