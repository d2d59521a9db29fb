package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// Allocators hands out cluster IPs and node ports, never one twice.
//
// With a Record (every API server has one) the allocations are recorded
// in etcd, as kube-apiserver records them, so that several API servers
// can allocate at once: a cluster IP is an IPAddress object, created
// before the Service (creating an existing one fails, whoever made it);
// the node ports are one bitmap written with compare-and-swap. The
// in-memory bitmaps are then only a guide to free values. Without a
// Record (unit tests) they are the state, rebuilt from the stored
// Services before the first allocation.
type Allocators struct {
	IPs   *allocator.IPRange
	Ports *allocator.PortRange
	// List returns every stored Service, for the repairs.
	List func(ctx context.Context) ([]corev1.Service, error)
	// Record is the durable record shared by every API server; nil keeps
	// the allocations in memory only.
	Record Record

	repairOnce sync.Mutex
	repaired   bool
	// repairMu makes the repairs of the record one at a time. The leaks
	// are what the last repair found recorded and held by no Service,
	// keyed by the recording and counted in repairs in a row (see
	// repairRecord).
	repairMu  sync.Mutex
	ipLeaks   map[ipLeak]int
	portLeaks map[portLeak]int
}

// Owner is the Service an allocation belongs to. Foreign: a record of
// something else (another allocator's, a user's IPAddress), which is
// taken but never freed by the repair.
type Owner struct {
	Namespace, Name string
	Foreign         bool
}

func ownerOf(svc *corev1.Service) Owner { return Owner{Namespace: svc.Namespace, Name: svc.Name} }

// Record is the durable record of allocations, shared by every API
// server of a cluster.
type Record interface {
	// ClaimIP records ip as owner's: allocator.ErrAllocated when it is
	// recorded already, whoever holds it (only the request that created
	// a record may undo it).
	ClaimIP(ctx context.Context, ip netip.Addr, owner Owner) error
	// FreeIP removes ip's record if it is rec: held by rec.Owner and,
	// when rec.ID is set, that very recording (an IP freed and recorded
	// again since is left alone).
	FreeIP(ctx context.Context, ip netip.Addr, rec IPRecord) error
	// ListIPs returns every recorded IP with its owner and the ID of its
	// recording.
	ListIPs(ctx context.Context) (map[netip.Addr]IPRecord, error)
	// UpdatePorts reads the recorded node ports, lets fn change them in
	// place, and writes them unless they changed meanwhile, in which
	// case fn runs again on the new ones. An error from fn ends the
	// update without a write.
	UpdatePorts(ctx context.Context, fn func(*NodePorts) error) error
}

// IPRecord is one recording of a cluster IP.
type IPRecord struct {
	Owner Owner
	// ID tells this recording from every other of the same IP (the
	// IPAddress's UID): an IP freed and recorded again has a new one.
	ID string
}

// NodePorts is the recorded node-port state.
type NodePorts struct {
	// Used is the bitmap, an allocator.PortRange Snapshot; nil when none
	// is recorded yet.
	Used []byte
	// Suspects are allocated ports that a repair found held by no
	// Service, each with a token naming that finding; never nil. Whoever
	// allocates or frees a port drops its token, so the same token found
	// again by a later repair proves that the port kept one holder in
	// between.
	Suspects map[int]string
}

// settle drops the tokens of the node ports among vs, which were just
// allocated or freed: what a repair suspected is about their former
// holder.
func (n *NodePorts) settle(vs []value) {
	for _, v := range vs {
		if !v.ip.IsValid() {
			delete(n.Suspects, v.port)
		}
	}
}

// NewAllocators returns allocators over a service CIDR and a node-port range.
func NewAllocators(serviceCIDR, nodePortRange string) (*Allocators, error) {
	ips, err := allocator.NewIPRange(serviceCIDR)
	if err != nil {
		return nil, err
	}
	ports, err := allocator.NewPortRange(nodePortRange)
	if err != nil {
		return nil, err
	}
	return &Allocators{IPs: ips, Ports: ports}, nil
}

// family is the IP family of the service range.
func (a *Allocators) family() corev1.IPFamily {
	if a.IPs.Prefix().Addr().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// Repair rebuilds the allocation state from the stored Services. It runs
// once; later calls return at once.
func (a *Allocators) Repair(ctx context.Context) error {
	a.repairOnce.Lock()
	defer a.repairOnce.Unlock()
	if a.repaired || a.List == nil {
		return nil
	}
	if a.Record != nil {
		sum, err := a.repairRecord(ctx)
		if err != nil {
			return fmt.Errorf("repair service allocations: %w", err)
		}
		a.repaired = true
		sum.log()
		return nil
	}
	svcs, err := a.List(ctx)
	if err != nil {
		return fmt.Errorf("repair service allocations: %w", err)
	}
	var ips, ports int
	for i := range svcs {
		for _, v := range usedValues(&svcs[i]) {
			switch {
			case v.ip.IsValid():
				if !a.IPs.Contains(v.ip) {
					slog.Warn("service cluster IP outside the configured range", "service", svcs[i].Namespace+"/"+svcs[i].Name, "ip", v.ip, "range", a.IPs.Prefix())
					continue
				}
				if a.IPs.HasIP(v.ip) {
					slog.Warn("service cluster IP allocated twice", "service", svcs[i].Namespace+"/"+svcs[i].Name, "ip", v.ip)
				}
				_ = a.IPs.AllocateIP(v.ip)
				ips++
			case a.Ports.Contains(v.port):
				_ = a.Ports.AllocatePort(v.port)
				ports++
			default:
				slog.Warn("service node port outside the configured range", "service", svcs[i].Namespace+"/"+svcs[i].Name, "port", v.port, "range", a.Ports.String())
			}
		}
	}
	a.repaired = true
	slog.Info("service allocations repaired", "services", len(svcs), "clusterIPs", ips, "nodePorts", ports)
	return nil
}

// value is one allocated cluster IP or node port.
type value struct {
	ip   netip.Addr
	port int
}

// usedValues lists what svc holds of the allocators.
func usedValues(svc *corev1.Service) []value {
	var out []value
	seen := map[value]bool{}
	add := func(v value) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, s := range ips {
			if ip, err := netip.ParseAddr(s); err == nil {
				add(value{ip: ip})
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			add(value{port: int(p.NodePort)})
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		add(value{port: int(svc.Spec.HealthCheckNodePort)})
	}
	return out
}

// txn records what one request allocated, to undo it on failure.
type txn struct {
	a     *Allocators
	ctx   context.Context
	owner Owner
	// durable: the values go to the Record (not for dry runs).
	durable bool
	// ports is the node-port state this attempt allocates from: the
	// recorded one when durable.
	ports *allocator.PortRange
	new   []value
}

func (t *txn) ip(ip netip.Addr) error {
	if !t.durable {
		if err := t.a.IPs.AllocateIP(ip); err != nil {
			return err
		}
		t.new = append(t.new, value{ip: ip})
		return nil
	}
	// The record decides: the local bitmap may not have seen another
	// API server's allocation or release yet.
	if err := t.a.IPs.CheckIP(ip); err != nil {
		return err
	}
	if err := t.a.Record.ClaimIP(t.ctx, ip, t.owner); err != nil {
		if errors.Is(err, allocator.ErrAllocated) {
			_ = t.a.IPs.AllocateIP(ip)
			return fmt.Errorf("the provided IP (%s) is already allocated", ip)
		}
		return apierrors.NewInternalError(fmt.Errorf("record cluster IP %s: %w", ip, err))
	}
	_ = t.a.IPs.AllocateIP(ip)
	t.new = append(t.new, value{ip: ip})
	return nil
}

func (t *txn) nextIP() (netip.Addr, error) {
	if !t.durable {
		ip, err := t.a.IPs.AllocateNextIP()
		if err == nil {
			t.new = append(t.new, value{ip: ip})
		}
		return ip, err
	}
	resynced := false
	for {
		ip, err := t.a.IPs.AllocateNextIP()
		if err != nil {
			// Full here may be stale: others' releases are seen at the
			// next repair. Look once at the record itself.
			if resynced {
				return ip, err
			}
			if rerr := t.a.resyncIPs(t.ctx); rerr != nil {
				return ip, apierrors.NewInternalError(rerr)
			}
			resynced = true
			continue
		}
		err = t.a.Record.ClaimIP(t.ctx, ip, t.owner)
		if err == nil {
			t.new = append(t.new, value{ip: ip})
			return ip, nil
		}
		if !errors.Is(err, allocator.ErrAllocated) {
			t.a.IPs.ReleaseIP(ip)
			return ip, apierrors.NewInternalError(fmt.Errorf("record cluster IP %s: %w", ip, err))
		}
		// Another API server's: it stays marked here; try another.
	}
}

func (t *txn) port(p int) error {
	if err := t.ports.AllocatePort(p); err != nil {
		return err
	}
	t.new = append(t.new, value{port: p})
	return nil
}

func (t *txn) nextPort() (int, error) {
	p, err := t.ports.AllocateNextPort()
	if err == nil {
		t.new = append(t.new, value{port: p})
	}
	return p, err
}

// dropPorts forgets the node ports of a failed attempt (their state is
// thrown away with it).
func (t *txn) dropPorts() {
	kept := t.new[:0]
	for _, v := range t.new {
		if v.ip.IsValid() {
			kept = append(kept, v)
		}
	}
	t.new = kept
}

func (t *txn) rollback() {
	if t.durable {
		t.a.releaseRecorded(t.ctx, t.owner, t.new)
		return
	}
	t.a.release(t.new)
}

func (a *Allocators) release(vs []value) {
	for _, v := range vs {
		if v.ip.IsValid() {
			a.IPs.ReleaseIP(v.ip)
		} else {
			a.Ports.ReleasePort(v.port)
		}
	}
}

// releaseRecorded frees values in the record and here. A failure leaves
// a leak, which the repair frees later.
func (a *Allocators) releaseRecorded(ctx context.Context, owner Owner, vs []value) {
	if len(vs) == 0 {
		return
	}
	// The request's context may end (or be about to); the release must
	// not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var ports []value
	for _, v := range vs {
		if v.ip.IsValid() {
			if err := a.Record.FreeIP(ctx, v.ip, IPRecord{Owner: owner}); err != nil {
				slog.Warn("free cluster IP (the repair frees it later)", "ip", v.ip, "service", owner.Namespace+"/"+owner.Name, "err", err)
				continue
			}
			a.IPs.ReleaseIP(v.ip)
		} else {
			ports = append(ports, v)
		}
	}
	if len(ports) == 0 {
		return
	}
	err := a.Record.UpdatePorts(ctx, func(np *NodePorts) error {
		r := a.Ports.Empty()
		r.Restore(np.Used)
		for _, v := range ports {
			r.ReleasePort(v.port)
		}
		np.Used = r.Snapshot()
		np.settle(ports)
		return nil
	})
	if err != nil {
		slog.Warn("free node ports (the repair frees them later)", "ports", portNumbers(ports), "service", owner.Namespace+"/"+owner.Name, "err", err)
	}
}

// portNumbers lists the node ports among vs.
func portNumbers(vs []value) []int {
	var out []int
	for _, v := range vs {
		if !v.ip.IsValid() {
			out = append(out, v.port)
		}
	}
	return out
}

// Release frees everything svc holds (after it is deleted).
func (a *Allocators) Release(ctx context.Context, svc *corev1.Service) {
	a.releaseValues(ctx, svc, usedValues(svc))
}

// releaseValues frees what svc held of vs.
func (a *Allocators) releaseValues(ctx context.Context, svc *corev1.Service, vs []value) {
	if a.Record == nil {
		a.release(vs)
		return
	}
	a.releaseRecorded(ctx, ownerOf(svc), vs)
}

func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func needsHealthCheckPort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// invalid wraps an allocation failure on a field as a 422 Invalid.
func invalid(svc *corev1.Service, path *field.Path, v any, err error) error {
	if errors.Is(err, allocator.ErrFull) {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate %s: %w", path, err))
	}
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name,
		field.ErrorList{field.Invalid(path, v, err.Error())})
}

// allocate gives svc what it needs and does not have from old (nil on
// create). It fills in the allocated values and returns the transaction.
// A dry run checks against this server's view and records nothing.
func (a *Allocators) allocate(ctx context.Context, svc, old *corev1.Service, dryRun bool) (*txn, error) {
	if err := a.Repair(ctx); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	t := &txn{a: a, ctx: ctx, owner: ownerOf(svc), durable: a.Record != nil && !dryRun, ports: a.Ports}
	err := a.allocateClusterIP(t, svc, old)
	if err == nil {
		if a.Record != nil {
			err = a.allocatePortsRecorded(t, svc, old, !dryRun)
		} else {
			err = a.allocateNodePorts(t, svc, old)
		}
	}
	if err != nil {
		t.rollback()
		return nil, err
	}
	return t, nil
}

// errNoPorts ends a port update that has nothing to write.
var errNoPorts = errors.New("no node ports to record")

// allocatePortsRecorded allocates svc's node ports from the recorded
// bitmap and writes it back with compare-and-swap; when another API
// server wrote first, it starts over from the new bitmap. Without write
// (a dry run) it only checks against the recorded bitmap.
func (a *Allocators) allocatePortsRecorded(t *txn, svc, old *corev1.Service, write bool) error {
	ports, hc := slices.Clone(svc.Spec.Ports), svc.Spec.HealthCheckNodePort
	err := a.Record.UpdatePorts(t.ctx, func(np *NodePorts) error {
		t.dropPorts()
		svc.Spec.Ports, svc.Spec.HealthCheckNodePort = slices.Clone(ports), hc
		t.ports = a.Ports.Empty()
		t.ports.Restore(np.Used)
		if err := a.allocateNodePorts(t, svc, old); err != nil {
			return err
		}
		if !write || !hasPorts(t.new) {
			return errNoPorts
		}
		np.Used = t.ports.Snapshot()
		np.settle(t.new)
		return nil
	})
	if errors.Is(err, errNoPorts) {
		if !write {
			t.dropPorts() // nothing to undo: nothing was written
		}
		return nil
	}
	if err != nil {
		t.dropPorts()
		if isStatus(err) {
			return err
		}
		return apierrors.NewInternalError(fmt.Errorf("record node ports: %w", err))
	}
	return nil
}

func hasPorts(vs []value) bool {
	for _, v := range vs {
		if !v.ip.IsValid() {
			return true
		}
	}
	return false
}

func isStatus(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

func (a *Allocators) allocateClusterIP(t *txn, svc, old *corev1.Service) error {
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	fam := a.family()
	for i, f := range spec.IPFamilies {
		if f != fam {
			return invalid(svc, specPath.Child("ipFamilies").Index(i), f,
				fmt.Errorf("%s is not configured on this cluster (the service range is %s)", f, a.IPs.Prefix()))
		}
	}
	if p := spec.IPFamilyPolicy; p != nil && *p == corev1.IPFamilyPolicyRequireDualStack {
		return invalid(svc, specPath.Child("ipFamilyPolicy"), *p, errors.New("this cluster is not configured for dual-stack services"))
	}
	spec.IPFamilies = []corev1.IPFamily{fam}
	if spec.IPFamilyPolicy == nil {
		spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	}
	if spec.ClusterIP == corev1.ClusterIPNone {
		spec.ClusterIPs = []string{corev1.ClusterIPNone}
		return nil
	}
	if old != nil && needsClusterIP(old) && old.Spec.ClusterIP == spec.ClusterIP && spec.ClusterIP != "" {
		spec.ClusterIPs = []string{spec.ClusterIP}
		return nil // kept
	}
	if spec.ClusterIP != "" {
		ip, err := netip.ParseAddr(spec.ClusterIP)
		if err != nil {
			return invalid(svc, specPath.Child("clusterIPs").Index(0), spec.ClusterIP, errors.New("must be empty, 'None', or a valid IP address"))
		}
		if ip.Is4() != (fam == corev1.IPv4Protocol) {
			return invalid(svc, specPath.Child("clusterIPs").Index(0), spec.ClusterIP,
				fmt.Errorf("%s is not configured on this cluster (the service range is %s)", familyOf(ip), a.IPs.Prefix()))
		}
		if err := t.ip(ip); err != nil {
			if isStatus(err) {
				return err
			}
			return invalid(svc, specPath.Child("clusterIPs").Index(0), []string{spec.ClusterIP},
				fmt.Errorf("failed to allocate IP %s: %w", ip, err))
		}
		spec.ClusterIPs = []string{spec.ClusterIP}
		return nil
	}
	ip, err := t.nextIP()
	if err != nil {
		if isStatus(err) {
			return err
		}
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %w", err))
	}
	spec.ClusterIP = ip.String()
	spec.ClusterIPs = []string{spec.ClusterIP}
	return nil
}

func (a *Allocators) allocateNodePorts(t *txn, svc, old *corev1.Service) error {
	held := map[int]bool{} // node ports old holds, which svc may keep
	if old != nil {
		for _, v := range usedValues(old) {
			if !v.ip.IsValid() {
				held[v.port] = true
			}
		}
	}
	portsPath := field.NewPath("spec", "ports")
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !needsNodePorts(svc) {
		// allocateLoadBalancerNodePorts: false allocates none, but the
		// ones asked for are still taken (as kube-apiserver does).
		mine := map[int]bool{}
		for i, p := range svc.Spec.Ports {
			np := int(p.NodePort)
			if np == 0 || mine[np] || held[np] {
				continue
			}
			if err := t.port(np); err != nil {
				return invalid(svc, portsPath.Index(i).Child("nodePort"), p.NodePort, err)
			}
			mine[np] = true
		}
	}
	if needsNodePorts(svc) {
		// First the requested ones, then fill the rest; a service port
		// number served over two protocols shares one node port.
		mine := map[int]bool{}
		for i, p := range svc.Spec.Ports {
			np := int(p.NodePort)
			if np == 0 || mine[np] {
				continue
			}
			if !held[np] {
				if err := t.port(np); err != nil {
					return invalid(svc, portsPath.Index(i).Child("nodePort"), p.NodePort, err)
				}
			}
			mine[np] = true
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, q := range svc.Spec.Ports {
				if q.Port == p.Port && q.NodePort != 0 && q.Protocol != p.Protocol {
					p.NodePort = q.NodePort
					break
				}
			}
			if p.NodePort != 0 {
				continue
			}
			np, err := t.nextPort()
			if err != nil {
				return apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
			}
			p.NodePort = int32(np)
		}
	}
	if needsHealthCheckPort(svc) {
		hc := int(svc.Spec.HealthCheckNodePort)
		switch {
		case hc == 0:
			np, err := t.nextPort()
			if err != nil {
				return apierrors.NewInternalError(fmt.Errorf("failed to allocate a healthCheckNodePort: %w", err))
			}
			svc.Spec.HealthCheckNodePort = int32(np)
		case !held[hc]:
			if err := t.port(hc); err != nil {
				return invalid(svc, field.NewPath("spec", "healthCheckNodePort"), hc, err)
			}
		}
	}
	return nil
}

// keepAllocated carries over to an updated service the values it already
// holds and did not mention (kubectl apply and replace leave them out),
// and drops the ones its new type no longer uses.
func keepAllocated(svc, old *corev1.Service) {
	if needsClusterIP(svc) && needsClusterIP(old) && svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = old.Spec.ClusterIP
		svc.Spec.ClusterIPs = old.Spec.ClusterIPs
		if len(svc.Spec.IPFamilies) == 0 {
			svc.Spec.IPFamilies = old.Spec.IPFamilies
		}
		if svc.Spec.IPFamilyPolicy == nil {
			svc.Spec.IPFamilyPolicy = old.Spec.IPFamilyPolicy
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		if svc.Spec.ClusterIP == old.Spec.ClusterIP {
			svc.Spec.ClusterIP = ""
			svc.Spec.ClusterIPs = nil
		}
		svc.Spec.IPFamilies = nil
		svc.Spec.IPFamilyPolicy = nil
	}
	oldNodePort := func(p corev1.ServicePort) int32 {
		for _, q := range old.Spec.Ports {
			if q.Port == p.Port && q.Protocol == p.Protocol {
				return q.NodePort
			}
		}
		for _, q := range old.Spec.Ports {
			if p.Name != "" && q.Name == p.Name {
				return q.NodePort
			}
		}
		return 0
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		switch {
		case needsNodePorts(svc) && needsNodePorts(old) && p.NodePort == 0:
			p.NodePort = oldNodePort(*p)
		case !needsNodePorts(svc) && p.NodePort != 0 && p.NodePort == oldNodePort(*p):
			p.NodePort = 0
		}
	}
	// Fields of the old type that the update left as they were go with
	// it, as kube-apiserver drops them (a NodePort made ExternalName keeps
	// no externalTrafficPolicy to be refused for).
	if old.Spec.Type == corev1.ServiceTypeExternalName && svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ExternalName == old.Spec.ExternalName {
		svc.Spec.ExternalName = ""
	}
	if externallyAccessible(old) && !externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if ptrEqual(svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if ptrEqual(svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if needsHealthCheckPort(svc) && needsHealthCheckPort(old) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	} else if !needsHealthCheckPort(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
}

// released lists what old holds and svc no longer does.
func released(svc, old *corev1.Service) []value {
	keep := map[value]bool{}
	for _, v := range usedValues(svc) {
		keep[v] = true
	}
	var out []value
	for _, v := range usedValues(old) {
		if !keep[v] {
			out = append(out, v)
		}
	}
	return out
}

// externallyAccessible: reachable from outside the cluster, where
// externalTrafficPolicy means something.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
