package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/ipset"
	utiliptables "github.com/svcnet/svcnet/internal/iptables"
	kipvs "github.com/svcnet/svcnet/internal/ipvs"
	ipvsproxy "github.com/svcnet/svcnet/internal/proxy/ipvs"
)

// IPVSAccess is what the ipvs mode needs of the OS besides iptables:
// IPVS itself, the dummy link and addresses, ipsets, and sysctls.
type IPVSAccess struct {
	Open   func() (*kipvs.Handle, error)
	Links  ipvsproxy.Links
	Sets   *ipset.Runner
	Sysctl func(key, value string) error
	// DeleteLink removes a dummy link (kube-ipvs0) left by an ipvs proxy.
	DeleteLink func(name string) error
}

// realIPVS programs the process's namespace; nil on a kernel without
// IPVS, where the mode cannot run and has left nothing behind.
func realIPVS() *IPVSAccess {
	if kipvs.Supported() != nil {
		return nil
	}
	return &IPVSAccess{
		DeleteLink: ipvsproxy.DeleteDummy,
		Open:       func() (*kipvs.Handle, error) { return kipvs.Open("") },
		Links:      ipvsproxy.Netlink{},
		Sets:       &ipset.Runner{},
		Sysctl: func(key, value string) error {
			return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
		},
	}
}

// ipvsSysctls are what kube-proxy's ipvs mode sets: IPVS keeps conntrack
// entries (the masquerade and hairpin rules need them), connections to a
// removed real server are dropped at their next packet, persistence
// templates of a weight-0 real server expire, and the node forwards.
var ipvsSysctls = [][2]string{
	{"net/ipv4/vs/conntrack", "1"},
	{"net/ipv4/vs/expire_nodest_conn", "1"},
	{"net/ipv4/vs/expire_quiescent_template", "1"},
	{"net/ipv4/ip_forward", "1"},
}

// schedulerProbe is where the scheduler check puts its throwaway virtual
// server (TEST-NET-2, as kube-proxy does).
var schedulerProbe = netip.MustParseAddr("198.51.100.0")

func startIPVS(d *deps) (syncer, error) {
	acc := d.os.IPVS
	if acc == nil {
		return nil, errors.New("no IPVS access configured")
	}
	h, err := acc.Open()
	if err != nil {
		return nil, err
	}
	go func() { <-d.ctx.Done(); h.Close() }()
	sysctls := ipvsSysctls
	if d.opts.IPVSStrictARP {
		sysctls = append(sysctls, [2]string{"net/ipv4/conf/all/arp_ignore", "1"}, [2]string{"net/ipv4/conf/all/arp_announce", "2"})
	}
	for _, s := range sysctls {
		if err := acc.Sysctl(s[0], s[1]); err != nil {
			return nil, fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(s[0], "/", "."), s[1], err)
		}
	}
	if err := h.SetTimeouts(kipvs.Timeouts{TCP: d.opts.IPVSTCPTimeout, TCPFin: d.opts.IPVSTCPFinTimeout, UDP: d.opts.IPVSUDPTimeout}); err != nil {
		d.logger.Warn("could not set the IPVS timeouts", "err", err)
	}
	if err := checkScheduler(h, d.opts.IPVSScheduler); err != nil {
		return nil, err
	}
	exclude, _ := d.opts.ipvsExcludeCIDRs()
	sync := d.sync
	// --ipvs-sync-period, as kube-proxy: the longest time between two
	// full syncs; the syncs between are partial.
	sync.FullSyncPeriod = d.opts.SyncPeriod
	p, err := ipvsproxy.NewProxier(ipvsproxy.ProxierConfig{
		Rules: ipvsproxy.Config{
			NodeConfig:           d.node,
			Scheduler:            d.opts.IPVSScheduler,
			AllNodePortAddresses: len(d.opts.NodePortAddresses) == 0,
		},
		Sync:         sync,
		IPVS:         h,
		Links:        acc.Links,
		Sets:         acc.Sets,
		IPTables:     d.os.IPTables,
		ExcludeCIDRs: exclude,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// checkScheduler makes sure the kernel has the scheduler, by creating and
// deleting a throwaway virtual server with it, so that a missing one is
// refused at start rather than at every sync.
func checkScheduler(h *kipvs.Handle, sched string) error {
	s := kipvs.Service{Addr: schedulerProbe, Protocol: kipvs.TCP, Port: 20000, Scheduler: sched}
	if err := h.AddService(s); err != nil {
		return fmt.Errorf("--ipvs-scheduler %s: this kernel refuses it (%v); rr, wrr, lc, wlc, sh, dh and mh are the usual ones", sched, err)
	}
	return h.DeleteService(s)
}

// cleanupIPVS removes the ipvs mode's state: virtual servers, kube-ipvs0,
// its chains and jumps but those keep owns, then its sets (which rules no
// longer name). Without IPVS access (a kernel without IPVS) there is
// nothing to remove.
func cleanupIPVS(ctx context.Context, o OS, keep *utiliptables.Owned) error {
	if o.IPVS == nil {
		return nil
	}
	var errs []error
	if h, err := o.IPVS.Open(); err == nil {
		errs = append(errs, h.Flush())
		h.Close()
	}
	if o.IPVS.DeleteLink != nil {
		errs = append(errs, o.IPVS.DeleteLink(ipvsproxy.DummyLink))
	}
	errs = append(errs, ipvsproxy.Cleanup(ctx, o.IPTables, keep))
	if o.IPVS.Sets != nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		errs = append(errs, o.IPVS.Sets.Destroy(cctx, ipvsproxy.SetNames(v1.IPv4Protocol)...))
	}
	return errors.Join(errs...)
}
