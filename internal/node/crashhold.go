package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/netns"
	nft "github.com/svcnet/svcnet/internal/nftables"
	"github.com/svcnet/svcnet/internal/programmed"
	"golang.org/x/sys/unix"
)

// A crash hold covers the moment between a serving container's crash
// and the proxies' programming of its pod's removal. In Kubernetes the
// pod's namespace answers that moment's new connections at once with a
// refusal (a TCP reset, ICMP port unreachable for UDP), which the
// client gets as a failed request, though the Service has other ready
// endpoints a second later. Held, the pod's namespace drops them
// instead, so that the client does what it does for a lost packet: TCP
// sends its SYN again (1 s, then 3 s later), by which time the proxy
// has deleted the connection's entry to the removed endpoint and picks
// a live one; a resolver asks again after its timeout, from a new
// socket. The hold ends as soon as no proxy sends the pod new
// connections (the drain's test: no EndpointSlice offers the pod, and
// every live proxy has programmed that), or the pod is ready again, or
// after crashHoldLimit; from then on the pod refuses again, as in
// Kubernetes, whoever still connects to it directly.
const crashHoldLimit = 10 * time.Second

// crashHoldTable is the table a hold puts into the pod's namespace.
const crashHoldTable = "svcnet-crash-hold"

// crashHold is the table of a hold on the pod at addr: the first packet
// of every TCP connection and UDP flow to it is dropped; its established
// connections, the answers to its own and its loopback traffic pass. TCP
// is told by its SYN, not by conntrack: the pod's namespace has tracked
// nothing before the hold (no rule needed it), and conntrack would take
// the next segment of a connection it has never seen for a new one. UDP
// has no such mark, so an answer to one of the pod's own flows that
// arrives in the moment the hold begins is dropped too (its sender asks
// again); from then on conntrack knows the pod's flows.
func crashHold(addr netip.Addr) *nft.Table {
	f := nft.IPv4
	if addr.Is6() {
		f = nft.IPv6
	}
	pod := nft.MatchAddr{Prefix: netip.PrefixFrom(addr, addr.BitLen())}
	return &nft.Table{Family: f, Name: crashHoldTable, Comment: "svcnet: a container of this pod crashed; new connections wait until no proxy sends them here",
		Chains: []*nft.Chain{{Name: "input", Hook: &nft.Hook{Type: "filter", Hook: "input"}, Rules: []nft.Rule{
			nft.R(pod, nft.MatchProto{Proto: nft.TCP}, nft.MatchTCPSyn{}, nft.Verdict{Kind: nft.Drop}),
			nft.R(pod, nft.MatchProto{Proto: nft.UDP}, nft.MatchCtNew{}, nft.Verdict{Kind: nft.Drop}),
		}}}}
}

// Hold puts a crash hold on the pod of uid, whose address is addr.
func (n *PodNetwork) Hold(uid string, addr netip.Addr) error {
	tbl := crashHold(addr)
	return n.nft(uid, func(c *nft.Conn) error {
		tx := nft.NewTx(tbl.Family, tbl.Name)
		tx.Fill(tbl, nft.FillOptions{Replace: true})
		return c.Run(tx)
	})
}

// Unhold ends the crash hold on the pod of uid, if there is one.
func (n *PodNetwork) Unhold(uid string, addr netip.Addr) error {
	tbl := crashHold(addr)
	err := n.nft(uid, func(c *nft.Conn) error {
		tx := nft.NewTx(tbl.Family, tbl.Name)
		tx.DeleteTable()
		return c.Run(tx)
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (n *PodNetwork) nft(uid string, do func(*nft.Conn) error) error {
	return netns.Do(n.Netns(uid), func() error {
		c, err := nft.Open()
		if err != nil {
			return err
		}
		defer c.Close()
		return do(c)
	})
}

// heldCrash is a hold in place, and the wait that ends it.
type heldCrash struct {
	addr    netip.Addr
	since   time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	outcome string // set before done closes
}

// holdAfterCrash puts a crash hold on the pod when the container that
// just exited leaves a pod that the proxies route to: ready as last
// published, selected by a Service, with a namespace of its own, not
// being deleted (the drain takes care of that) and not opted out of
// svcnet's drain (EndpointDrainAnnotation "none").
func (w *podWorker) holdAfterCrash(ctx context.Context) {
	addr := w.sb.IP()
	if w.hold != nil || w.a.net == nil || w.pod.DeletionTimestamp != nil || w.pod.Spec.HostNetwork || !addr.IsValid() ||
		w.pod.Annotations[EndpointDrainAnnotation] == "none" || !podReady(w.pod) {
		return
	}
	svcs := w.a.selectingServices(w.pod)
	if len(svcs) == 0 {
		return
	}
	if err := w.a.net.Hold(string(w.uid), addr); err != nil {
		w.log().Warn("crash hold", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, crashHoldLimit)
	h := &heldCrash{addr: addr, since: time.Now(), cancel: cancel, done: make(chan struct{})}
	w.hold = h
	ns := w.pod.Namespace
	go func() {
		defer close(h.done)
		version, unrouted := w.a.awaitUnrouted(ctx, ns, svcs, addr.String())
		if !unrouted {
			h.outcome = "still offered by an EndpointSlice"
			return
		}
		var o programmed.Outcome
		if w.a.programmed != nil {
			o = w.a.programmed.Wait(ctx, version)
		}
		h.outcome = "unrouted"
		if !o.Done() {
			h.outcome = fmt.Sprintf("unrouted, %d proxies behind", len(o.Behind))
		} else if o.Consumers > 0 {
			h.outcome = fmt.Sprintf("unrouted and programmed by %d proxies", o.Consumers)
		}
	}()
	w.log().Info("crash hold: new connections to the pod wait until no proxy sends them here", "services", svcs)
}

// holdDone delivers the end of the hold's wait (nil: no hold, never).
func (w *podWorker) holdDone() <-chan struct{} {
	if w.hold == nil {
		return nil
	}
	return w.hold.done
}

// endHold ends the hold, if any, saying why.
func (w *podWorker) endHold(why string) {
	h := w.hold
	if h == nil {
		return
	}
	w.hold = nil
	h.cancel()
	<-h.done
	if why == "" {
		why = h.outcome
	}
	if err := w.a.net.Unhold(string(w.uid), h.addr); err != nil {
		w.log().Warn("end crash hold", "err", err)
	}
	w.log().Info("crash hold ended", "why", why, "held", time.Since(h.since).Round(time.Millisecond))
}

// podReady is the pod's Ready condition as last published.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
