// Package node is svcnet's node agent (kubelet's job): it registers its
// Node, keeps its Lease, and runs the pods bound to it as processes in
// their own network namespaces, with probes, restarts, service
// environment variables, graceful termination and status. It runs inside
// its node's network namespace and starts the node's service proxy there.
package node

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/kubeclient"
	"github.com/svcnet/svcnet/internal/node/cgroups"
	"github.com/svcnet/svcnet/internal/node/ipam"
	"github.com/svcnet/svcnet/internal/node/pods"
	noderuntime "github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/server"
	"github.com/svcnet/svcnet/internal/node/users"
	"github.com/svcnet/svcnet/internal/programmed"
	"github.com/svcnet/svcnet/internal/svcstate"
)

// Version is what the agent reports as its kubelet version.
const Version = "v1.37.2-svcnet"

// Config configures an agent.
type Config struct {
	Kubeconfig string
	NodeName   string
	NodeIP     netip.Addr
	PodCIDR    netip.Prefix
	// ClusterCIDR is every node's pods; traffic from this node's pods to
	// anywhere else is masqueraded to the node, as a CNI plugin does.
	ClusterCIDR   netip.Prefix
	Bridge        string // the pod bridge in the node's namespace
	NetnsPrefix   string // names of pod namespaces
	StateDir      string
	ClusterDNS    string
	ClusterDomain string
	Labels        map[string]string
	// Proxy, when set, is the command line of the node's service proxy,
	// started (and restarted) by the agent in its own namespace.
	Proxy []string
	// NodeCache, when set, is the command line of the node-local DNS
	// cache, run like Proxy; ClusterDNS is then its address.
	NodeCache []string
	// IPTablesBinary is the node's iptables (iptables, iptables-legacy,
	// iptables-nft): one choice for the agent's rules and the proxy's.
	IPTablesBinary string
	// ServerAddress is where the agent serves logs and exec for the API
	// server (like kubelet's port 10250) over TLS with TLSCertFile and
	// TLSKeyFile, trusting client certificates signed by ClientCAFile;
	// empty for none.
	ServerAddress string
	TLSCertFile   string
	TLSKeyFile    string
	ClientCAFile  string
	// EndpointDrainDelay is how much longer a deleted pod that backs a
	// Service and has no preStop hook keeps running before its SIGTERM
	// once the proxies have programmed its removal: a margin for proxies
	// that do not say so (kube-proxy). 0 by default.
	EndpointDrainDelay time.Duration
	// ImageStoreDir is the machine's image store, which the agent pulls
	// the images of its pods into (empty: none, only built-in images
	// run). RegistryMirrors lists, per registry host, the mirrors tried
	// before it; InsecureRegistries are the hosts spoken to in plain
	// HTTP (imagestore.PullOptions).
	ImageStoreDir      string
	RegistryMirrors    map[string][]string
	InsecureRegistries []string
	// PodUsersDir holds the claims on pods' default users, shared by
	// every agent of the machine (empty: StateDir/users, this node's).
	PodUsersDir string
	// CgroupRoot is the node's cgroup v2 group, below which every
	// container gets one of its own (empty: only containers with
	// limits get groups).
	CgroupRoot string
}

// Agent is a running node agent.
type Agent struct {
	cfg      Config
	client   kubernetes.Interface
	services corelisters.ServiceLister
	net      *PodNetwork
	self     string
	recorder record.EventRecorder
	// pods is what the pods' sandboxes share.
	pods pods.Runtime
	// store is the image store (nil: none); pullOptions are the node's
	// registry settings, without a pod's secrets.
	store       imageStore
	pullOptions imagestore.PullOptions

	// programmed tells when the proxies have programmed a change.
	programmed *programmed.Waiter

	mu        sync.Mutex
	workers   map[types.UID]*podWorker
	stats     statsSampler
	hostPorts hostPortTable
	wg        sync.WaitGroup
}

// New prepares an agent.
func New(cfg Config) (*Agent, error) {
	client, _, err := kubeclient.New(cfg.Kubeconfig, kubeclient.Options{UserAgent: "svcnet-node/" + cfg.NodeName, QPS: 100, Burst: 200})
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	a := &Agent{cfg: cfg, client: client, self: self, workers: map[types.UID]*podWorker{},
		net: &PodNetwork{Bridge: cfg.Bridge, Prefix: cfg.NetnsPrefix,
			IPAM: &ipam.Allocator{CIDR: cfg.PodCIDR, Gateway: cfg.PodCIDR.Addr().Next(), Dir: cfg.StateDir + "/ipam"}}}
	a.pods = pods.Runtime{Self: self, NodeIP: cfg.NodeIP, ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain,
		NodeResolv: string(resolv), Net: a.net, Volumes: apiSource{client}, Node: a}
	a.pods.Cgroups = cgroups.Detect()
	if cfg.CgroupRoot != "" {
		if a.pods.Cgroups, err = a.pods.Cgroups.Under(cfg.CgroupRoot); err != nil {
			return nil, err
		}
	}
	slog.Info("container cgroups", "cgroups", a.pods.Cgroups.String())
	if a.pods.Users, err = users.Open(cmp.Or(cfg.PodUsersDir, filepath.Join(cfg.StateDir, "users"))); err != nil {
		return nil, err
	}
	if cfg.ImageStoreDir != "" {
		store, err := imagestore.Open(cfg.ImageStoreDir)
		if err != nil {
			return nil, err
		}
		a.store, a.pods.Images = store, store
		a.pullOptions = imagestore.PullOptions{Mirrors: cfg.RegistryMirrors, Insecure: cfg.InsecureRegistries}
	}
	return a, nil
}

// Run registers the node and runs its pods until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	a.recorder = controller.NewRecorder(ctx, a.client, "kubelet")
	if err := a.register(ctx); err != nil {
		return err
	}
	if a.cfg.ClusterCIDR.IsValid() {
		ex := &iptables.Exec{Binary: cmp.Or(a.cfg.IPTablesBinary, "iptables")}
		if err := podEgress(ctx, ex, a.cfg.PodCIDR, a.cfg.ClusterCIDR); err != nil {
			return err
		}
	}
	go a.heartbeat(ctx)

	factory := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {}))
	a.services = factory.Core().V1().Services().Lister()
	podFactory := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
		}))
	podInf := podFactory.Core().V1().Pods().Informer()
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.podChanged(ctx, o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { a.podChanged(ctx, o.(*corev1.Pod)) },
		DeleteFunc: a.podDeleted,
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	a.programmed = programmed.NewWaiter(a.client)
	a.programmed.Start(ctx)
	podFactory.Start(ctx.Done())
	podFactory.WaitForCacheSync(ctx.Done())
	a.cleanupStale(podInf.GetStore())
	if len(a.cfg.Proxy) > 0 {
		go a.runDaemon(ctx, "proxy", a.cfg.Proxy)
	}
	if len(a.cfg.NodeCache) > 0 {
		go a.runDaemon(ctx, "node-cache", a.cfg.NodeCache)
	}
	go a.sampleStats(ctx)
	if a.cfg.ServerAddress != "" {
		srv := server.New(server.Config{Address: a.cfg.ServerAddress, CertFile: a.cfg.TLSCertFile, KeyFile: a.cfg.TLSKeyFile,
			ClientCAFile: a.cfg.ClientCAFile, NodeName: a.cfg.NodeName, NodeIP: a.cfg.NodeIP, PodCIDR: a.cfg.PodCIDR,
			ClusterCIDR: a.cfg.ClusterCIDR, Self: a.self}, a)
		go func() {
			if err := srv.Run(ctx); err != nil {
				slog.Error("node server", "err", err)
			}
		}()
	}
	slog.Info("node agent ready", "node", a.cfg.NodeName, "podCIDR", a.cfg.PodCIDR)
	<-ctx.Done()
	a.wg.Wait()
	return nil
}

func (a *Agent) podChanged(ctx context.Context, pod *corev1.Pod) {
	a.mu.Lock()
	w, ok := a.workers[pod.UID]
	if !ok {
		w = newPodWorker(a, pod)
		a.workers[pod.UID] = w
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			w.run(ctx)
			a.mu.Lock()
			delete(a.workers, pod.UID)
			a.mu.Unlock()
		}()
	}
	a.mu.Unlock()
	if ok {
		w.update(pod)
	}
}

func (a *Agent) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	w := a.workers[pod.UID]
	a.mu.Unlock()
	if w != nil {
		w.deleted()
	}
}

// cleanupStale removes the sandboxes of pods that no longer exist, left
// by an earlier run of the agent.
func (a *Agent) cleanupStale(store cache.Store) {
	live := map[string]bool{}
	for _, o := range store.List() {
		live[string(o.(*corev1.Pod).UID)] = true
	}
	// A pod bound since the list was taken has a worker already.
	gone := func(uid string) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !live[uid] && a.workers[types.UID(uid)] == nil
	}
	for _, uid := range a.net.Owners() {
		if gone(uid) {
			slog.Info("removing the sandbox of a pod that is gone", "uid", uid)
			a.killContainers(uid)
			a.net.Teardown(uid)
		}
	}
	// Containers outlive the agent (their shims keep them): those of pods
	// deleted meanwhile end here, sandbox or not.
	dirs, _ := os.ReadDir(filepath.Join(a.cfg.StateDir, "pods"))
	for _, d := range dirs {
		if gone(d.Name()) {
			a.killContainers(d.Name())
			if err := a.pods.Cgroups.RemoveAll("svcnet-" + d.Name() + "-"); err != nil {
				slog.Warn("remove the cgroups of a pod that is gone", "uid", d.Name(), "err", err)
			}
			dir := filepath.Join(a.cfg.StateDir, "pods", d.Name())
			if err := noderuntime.ReleaseNamespaces(dir); err != nil {
				slog.Warn("release the namespaces of a pod that is gone", "uid", d.Name(), "err", err)
			}
			_ = os.RemoveAll(dir)
		}
	}
}

// killContainers ends every container an earlier run started for the pod.
func (a *Agent) killContainers(uid string) {
	runs, _ := filepath.Glob(filepath.Join(a.cfg.StateDir, "pods", uid, "*.run"))
	for _, run := range runs {
		noderuntime.Kill(run)
	}
}

// ServiceEnv is the service environment of a pod starting now.
func (a *Agent) ServiceEnv(pod *corev1.Pod) []corev1.EnvVar {
	svcs, err := a.services.List(labels.Everything())
	if err != nil {
		return nil
	}
	return pods.ServiceEnv(pod.Namespace, svcs, ptr.Deref(pod.Spec.EnableServiceLinks, true))
}

// selectingServices counts the Services of the pod's namespace whose
// selector chooses it.
func (a *Agent) selectingServices(pod *corev1.Pod) []string {
	var names []string
	for _, s := range a.servicesOf(pod) {
		names = append(names, s.Name)
	}
	return names
}

// servicesOf are the Services whose selector selects pod.
func (a *Agent) servicesOf(pod *corev1.Pod) []*corev1.Service {
	svcs, err := a.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*corev1.Service
	for _, s := range svcs {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			out = append(out, s)
		}
	}
	return out
}

// drainPoll is how often a draining pod's slices are read: only pods
// being deleted are polled, each for the time its endpoint controller
// takes, so this costs the API a few requests per deletion.
const drainPoll = 100 * time.Millisecond

// proxiedSlices selects the EndpointSlices the node proxies program, as
// they select them: not those of headless Services or of Services another
// proxy handles.
const proxiedSlices = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"

// awaitUnrouted waits until no EndpointSlice of the named Services that
// the proxies program offers addr to new connections, and returns the
// newest resourceVersion among those slices: a proxy whose watermark has
// reached it has programmed that (see internal/programmed). False if ctx
// ended first. The agent watches no slices (kubelet does not either:
// that would be every slice of the cluster on every node), so it lists
// the few it needs by label; an unreachable API server ends the wait at
// ctx's end, never earlier.
func (a *Agent) awaitUnrouted(ctx context.Context, namespace string, services []string, addr string) (uint64, bool) {
	if addr == "" || len(services) == 0 {
		return 0, true
	}
	selector := discovery.LabelServiceName + " in (" + strings.Join(services, ",") + ")," + proxiedSlices
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		l, err := a.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && !stillRouted(l.Items, []string{addr}) {
			var newest uint64
			for i := range l.Items {
				if v, ok := svcstate.ParseResourceVersion(l.Items[i].ResourceVersion); ok {
					newest = max(newest, v)
				}
			}
			return newest, true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-tick.C:
		}
	}
}

// apiSource reads volume contents through the node's API client.
type apiSource struct{ client kubernetes.Interface }

func (s apiSource) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiSource) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiSource) Token(ctx context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return s.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
}

// ConfigMap implements pods.EnvSource.
func (a *Agent) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return a.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

// Secret implements pods.EnvSource.
func (a *Agent) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return a.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// Event records an event on pod.
func (a *Agent) Event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	if a.recorder != nil {
		a.recorder.Eventf(pod, typ, reason, format, args...)
	}
}

// register creates or updates the Node object.
func (a *Agent) register(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: map[string]string{
			corev1.LabelHostname: a.cfg.NodeName, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
		}},
		Spec: corev1.NodeSpec{PodCIDR: a.cfg.PodCIDR.String(), PodCIDRs: []string{a.cfg.PodCIDR.String()}},
	}
	for k, v := range a.cfg.Labels {
		node.Labels[k] = v
	}
	var err error
	for attempt := 0; ; attempt++ {
		var cur *corev1.Node
		cur, err = a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = a.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		case err == nil:
			upd := cur.DeepCopy()
			for k, v := range node.Labels {
				if upd.Labels == nil {
					upd.Labels = map[string]string{}
				}
				upd.Labels[k] = v
			}
			if upd.Spec.PodCIDR == "" {
				upd.Spec.PodCIDR, upd.Spec.PodCIDRs = node.Spec.PodCIDR, node.Spec.PodCIDRs
			}
			_, err = a.client.CoreV1().Nodes().Update(ctx, upd, metav1.UpdateOptions{})
		}
		if err == nil || attempt > 60 || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond) // the API server may still be starting
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
	}
	return a.updateStatus(ctx)
}

// readyInAPI reports whether the API server's copy of the node is Ready
// (true when it cannot tell: the regular update will come).
func (a *Agent) readyInAPI(ctx context.Context) bool {
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return true
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (a *Agent) updateStatus(ctx context.Context) error {
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, old := range node.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	var uname kernelInfo
	uname.read()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memoryBytes(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	upd := node.DeepCopy()
	upd.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: a.cfg.NodeIP.String()},
			{Type: corev1.NodeHostName, Address: a.cfg.NodeName},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: Version, OperatingSystem: "linux", Architecture: runtime.GOARCH,
			KernelVersion: uname.release, OSImage: osImage(), ContainerRuntimeVersion: "svcnet://" + Version,
			MachineID: a.cfg.NodeName, SystemUUID: a.cfg.NodeName, BootID: uname.bootID,
		},
	}
	_, err = a.client.CoreV1().Nodes().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the node's Lease every 10 s and its status every 40 s.
func (a *Agent) heartbeat(ctx context.Context) {
	leases := a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: corev1.NamespaceNodeLease},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a.cfg.NodeName), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &now}}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.RenewTime = &now
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			slog.Warn("node lease", "err", err)
		}
		// The full status every 40 s, and at once when the API's copy is
		// not Ready: the node lifecycle controller marked the node
		// Unknown while this agent was cut off, and until it says Ready
		// again the node stays tainted and its pods' eviction clocks run.
		if i%4 == 3 || !a.readyInAPI(ctx) {
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return a.updateStatus(ctx) }); err != nil && ctx.Err() == nil {
				slog.Warn("node status", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
