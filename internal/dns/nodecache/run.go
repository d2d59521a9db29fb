package nodecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"

	"github.com/svcnet/svcnet/internal/dns/cluster"
	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/resolver"
	"github.com/svcnet/svcnet/internal/dns/server"
	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Run serves the cache until ctx ends. Flags are checked, the address set
// up and the port bound before anything watches, so a bad command line or
// a taken port fails at once.
func Run(ctx context.Context, o Options) error {
	c, err := o.parse()
	if err != nil {
		return err
	}
	client, _, err := kubeclient.New(c.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-node-cache"})
	if err != nil {
		return err
	}
	if c.SetupAddress {
		ex := &iptables.Exec{Binary: c.IPTablesBinary}
		if err := Setup(ctx, c.addr, c.port, ex); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fwd, err := forward.New(forward.Options{
		Upstreams: []string{c.fallback}, TCP: true, Spread: true, Timeout: c.Timeout, Registerer: reg,
	})
	if err != nil {
		return err
	}
	defer fwd.Close()
	srv, err := server.New(server.Options{
		Upstream: fwd, Resolver: resolver.Config{ForwardAll: true}, Registerer: reg, QueryLog: c.QueryLog,
		// Every replica once, at most: a pod's resolver waits 5 s.
		ForwardTimeout: 4 * time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpErr, err := cluster.ServeHTTP(ctx, c.MetricsBindAddress, c.MetricsBindAddress, false, reg, func() bool { return true })
	if err != nil {
		return err
	}
	if err := srv.Listen(c.Listen); err != nil {
		return err
	}

	nn := types.NamespacedName{Namespace: c.namespace, Name: c.name}
	kick := make(chan struct{}, 1)
	tracker := svcstate.NewTracker(svcstate.Config{OnChange: func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}})
	// Only the one Service and its slices: a node's cache must not hold
	// the whole cluster's.
	svcFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(c.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.name).String()
		}))
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(c.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = discovery.LabelServiceName + "=" + c.name
		}))
	if _, err := svcFactory.Core().V1().Services().Informer().AddEventHandler(tracker.ServiceHandler()); err != nil {
		return err
	}
	if _, err := sliceFactory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(tracker.EndpointSliceHandler()); err != nil {
		return err
	}
	svcFactory.Start(ctx.Done())
	sliceFactory.Start(ctx.Done())
	defer svcFactory.Shutdown()
	defer sliceFactory.Shutdown()
	go follow(ctx, tracker, nn, c.fallback, fwd, kick)

	slog.Info("node-local DNS cache starting", "listen", srv.Addr(), "service", nn.String(), "fallback", c.fallback)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	select {
	case <-ctx.Done():
		err = nil
	case err = <-httpErr:
	case err = <-served:
	}
	cancel()
	<-served
	return err
}

// follow points the forwarder at the Service's endpoints as they change.
func follow(ctx context.Context, tracker *svcstate.Tracker, nn types.NamespacedName, fallback string, fwd *forward.Forwarder, kick <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		snap, _ := tracker.Snapshot()
		want := choose(Upstreams(snap.Service(nn)), fallback)
		if slices.Equal(want, fwd.Upstreams()) {
			continue
		}
		if err := fwd.SetUpstreams(want); err != nil {
			slog.Error("node-local DNS cache: upstreams", "err", err)
			continue
		}
		slog.Info("node-local DNS cache: cluster DNS replicas", "upstreams", want)
	}
}

// Setup puts addr on the loopback of the namespace it runs in, so that
// pods reach it through their default route to the node, and keeps DNS
// to and from it out of conntrack, as NodeLocal DNSCache does: UDP
// queries then never wait on a conntrack entry or race a DNAT rule.
// Running it again changes nothing.
func Setup(ctx context.Context, addr netip.Addr, port uint16, ex iptables.Executor) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("node-local DNS address: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("node-local DNS address: lo up: %w", err)
	}
	bits := addr.BitLen()
	if err := netlink.AddrReplace(lo, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(bits, bits)}}); err != nil {
		return fmt.Errorf("node-local DNS address %s on lo: %w", addr, err)
	}
	var errs []error
	for _, r := range notrackRules(addr, port) {
		errs = append(errs, ex.EnsureRule(ctx, "raw", r.chain, r.args...))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node-local DNS NOTRACK rules: %w", err)
	}
	return nil
}

type rule struct {
	chain string
	args  []string
}

// notrackRules skip conntrack for the cache's traffic with pods: queries
// in (PREROUTING) and answers out (OUTPUT), UDP and TCP.
func notrackRules(addr netip.Addr, port uint16) []rule {
	p := fmt.Sprint(port)
	var out []rule
	for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		pr := string(proto)
		out = append(out,
			rule{"PREROUTING", []string{"-d", addr.String(), "-p", strings.ToLower(pr), "--dport", p, "-m", "comment", "--comment", "svcnet node-local DNS", "-j", "NOTRACK"}},
			rule{"OUTPUT", []string{"-s", addr.String(), "-p", strings.ToLower(pr), "--sport", p, "-m", "comment", "--comment", "svcnet node-local DNS", "-j", "NOTRACK"}},
		)
	}
	return out
}
