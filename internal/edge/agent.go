package edge

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// Agent programs the edge namespace it runs in.
type Agent struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	nodes     corelisters.NodeLister
	iface     string
	trigger   chan struct{}
	mu        sync.Mutex
	health    map[string]bool // "nodeIP:port" -> has local endpoints
	lastRules string
	owned     map[netip.Addr]bool
	ipt       iptables.Executor
}

// New connects to the API server. iptablesBinary is the edge's iptables
// (as the nodes', one choice per cluster).
func New(kubeconfig, iface, iptablesBinary string) (*Agent, error) {
	client, _, err := kubeclient.New(kubeconfig, kubeclient.Options{UserAgent: "svcnet-edge"})
	if err != nil {
		return nil, err
	}
	return &Agent{client: client, iface: iface, trigger: make(chan struct{}, 1), health: map[string]bool{}, owned: map[netip.Addr]bool{},
		ipt: &iptables.Exec{Binary: cmp.Or(iptablesBinary, "iptables")}}, nil
}

// Run keeps the edge programmed until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("forwarding in the edge namespace: %w", err)
	}
	// The edge forwards out of the interface traffic came in on.
	_ = os.WriteFile("/proc/sys/net/ipv4/conf/all/send_redirects", []byte("0"), 0o644)
	_ = os.WriteFile("/proc/sys/net/ipv4/conf/"+a.iface+"/send_redirects", []byte("0"), 0o644)
	if err := a.hook(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(a.client, 0)
	a.services = factory.Core().V1().Services().Lister()
	a.nodes = factory.Core().V1().Nodes().Lister()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { a.poke() }, UpdateFunc: func(any, any) { a.poke() }, DeleteFunc: func(any) { a.poke() },
	}
	_, _ = factory.Core().V1().Services().Informer().AddEventHandler(poke)
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(poke)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go a.checkHealth(ctx)
	slog.Info("edge load balancer ready", "interface", a.iface)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		if err := a.sync(); err != nil {
			slog.Error("edge sync", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.trigger:
		case <-tick.C:
		}
	}
}

func (a *Agent) poke() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// hook jumps from the built-in chains to the edge's own.
func (a *Agent) hook(ctx context.Context) error {
	for _, c := range []struct{ table, chain string }{
		{"nat", ChainPrerouting}, {"nat", ChainPostrouting}, {"filter", ChainFilter},
	} {
		if err := a.ipt.EnsureChain(ctx, c.table, c.chain); err != nil {
			return err
		}
	}
	for _, j := range []struct{ table, chain, target string }{
		{"nat", "PREROUTING", ChainPrerouting},
		{"nat", "OUTPUT", ChainPrerouting},
		{"nat", "POSTROUTING", ChainPostrouting},
		{"filter", "FORWARD", ChainFilter},
		{"filter", "INPUT", ChainFilter},
	} {
		if err := a.ipt.EnsureRule(ctx, j.table, j.chain, "-j", j.target); err != nil {
			return err
		}
	}
	return nil
}

func nodeIP(n *corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip, err := netip.ParseAddr(a.Address)
			return ip, err == nil
		}
	}
	return netip.Addr{}, false
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// backends are the ready nodes; for externalTrafficPolicy Local the ones
// whose health-check port says they have endpoints (all ready nodes while
// none has answered yet).
func (a *Agent) backends(svc *corev1.Service) []netip.Addr {
	nodes, _ := a.nodes.List(labels.Everything())
	var all, healthy []netip.Addr
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range nodes {
		ip, ok := nodeIP(n)
		if !ok || !ready(n) {
			continue
		}
		all = append(all, ip)
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort != 0 &&
			a.health[fmt.Sprintf("%s:%d", ip, svc.Spec.HealthCheckNodePort)] {
			healthy = append(healthy, ip)
		}
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort != 0 {
		return healthy
	}
	return all
}

// checkHealth polls the health-check node ports of Local services, as a
// cloud load balancer does.
func (a *Agent) checkHealth(ctx context.Context) {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		svcs, _ := a.services.List(labels.Everything())
		nodes, _ := a.nodes.List(labels.Everything())
		next := map[string]bool{}
		for _, svc := range svcs {
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.HealthCheckNodePort == 0 {
				continue
			}
			for _, n := range nodes {
				ip, ok := nodeIP(n)
				if !ok {
					continue
				}
				addr := net.JoinHostPort(ip.String(), fmt.Sprint(svc.Spec.HealthCheckNodePort))
				resp, err := hc.Get("http://" + addr + "/")
				if err == nil {
					next[addr] = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
			}
		}
		a.mu.Lock()
		changed := fmt.Sprint(next) != fmt.Sprint(a.health)
		a.health = next
		a.mu.Unlock()
		if changed {
			a.poke()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (a *Agent) sync() error {
	svcs, err := a.services.List(labels.Everything())
	if err != nil {
		return err
	}
	fs := Frontends(svcs, a.backends)
	if err := a.addresses(fs); err != nil {
		return err
	}
	rules := Rules(fs)
	if rules == a.lastRules {
		return nil
	}
	if err := a.ipt.Restore(context.Background(), []byte(rules)); err != nil {
		return err
	}
	a.lastRules = rules
	slog.Info("edge programmed", "frontends", len(fs))
	return nil
}

// addresses puts the frontends' addresses on the interface (as /32, so
// the edge answers ARP for them) and removes the ones no longer used.
func (a *Agent) addresses(fs []Frontend) error {
	link, err := netlink.LinkByName(a.iface)
	if err != nil {
		return err
	}
	want := map[netip.Addr]bool{}
	for _, f := range fs {
		want[f.IP] = true
	}
	for ip := range want {
		if a.owned[ip] {
			continue
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("add %s: %w", ip, err)
		}
		a.owned[ip] = true
	}
	for ip := range a.owned {
		if !want[ip] {
			_ = netlink.AddrDel(link, &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}})
			delete(a.owned, ip)
		}
	}
	return nil
}
