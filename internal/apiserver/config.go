package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	genericoptions "k8s.io/apiserver/pkg/server/options"

	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/registry/service"
)

// The API server is built as kube-apiserver is: Options (the flags) are
// completed and validated, turned into a Config (what the server runs
// on: its listener, PKI and etcd), and the Config into a Server (the
// generic server, its resources and hooks; server.go's build).

// New completes and validates opts, prepares what the server runs on and
// builds the server; Run serves it.
func New(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c, err := opts.Config(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.build()
	if err != nil {
		c.close()
		return nil, err
	}
	return s, nil
}

// complete fills in what an empty option means, and turns the flags
// that name things (--also-listen, --listen-fd) into them.
func (o *Options) complete() error {
	if o.EndpointReconcilerType == "" {
		o.EndpointReconcilerType = "lease"
	}
	for _, a := range o.AlsoListenAt {
		l, err := ParseNetnsListen(a)
		if err != nil {
			return fmt.Errorf("--also-listen %w", err)
		}
		o.AlsoListen = append(o.AlsoListen, l)
	}
	o.AlsoListenAt = nil
	if o.ListenFD > 0 && o.Listener == nil {
		f := os.NewFile(uintptr(o.ListenFD), "secure-port")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--listen-fd %d: %w", o.ListenFD, err)
		}
		o.Listener = l
	}
	return nil
}

// Validate reports options that cannot work, before anything is made.
func (o Options) Validate() error {
	if o.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if a := o.AdvertiseAddress; a != "" {
		ip := net.ParseIP(a)
		if ip == nil {
			return fmt.Errorf("--advertise-address %q is not an IP address", a)
		}
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast() {
			// An endpoint may not be one (Endpoints validation): the
			// kubernetes Service could never point at it.
			return fmt.Errorf("--advertise-address %s: must be an address other hosts reach, not loopback, link-local, multicast or unspecified", a)
		}
	}
	if o.EventTTL < time.Second {
		return fmt.Errorf("--event-ttl %s: must be at least a second", o.EventTTL)
	}
	if o.AllocationRepairInterval <= 0 {
		return fmt.Errorf("--allocation-repair-interval %s: must be positive", o.AllocationRepairInterval)
	}
	switch o.EndpointReconcilerType {
	case "lease", "none":
	default:
		return fmt.Errorf("--endpoint-reconciler-type %q: svcnet knows lease and none (kube-apiserver's master-count is gone since 1.33)", o.EndpointReconcilerType)
	}
	if net.ParseIP(o.BindAddress) == nil {
		return fmt.Errorf("--bind-address %q is not an IP address", o.BindAddress)
	}
	if len(o.EtcdServers) == 0 {
		if o.EtcdCAFile != "" || o.EtcdCertFile != "" || o.EtcdKeyFile != "" {
			return errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile are for --etcd-servers; the embedded etcd has certificates of its own")
		}
	} else if (o.EtcdCertFile == "") != (o.EtcdKeyFile == "") {
		return errors.New("--etcd-certfile and --etcd-keyfile go together")
	}
	if o.Audit != nil {
		if errs := o.Audit.Validate(); len(errs) > 0 {
			return fmt.Errorf("audit: %w", utilerrors.NewAggregate(errs))
		}
	}
	return nil
}

// Config is what a server runs on, made from valid Options: the service
// allocators, the listener (and the URL and port it gives), the PKI with
// the serving certificate and token file, and etcd — started here when it
// is embedded.
type Config struct {
	opts     Options
	alloc    *service.Allocators
	listener net.Listener
	port     int
	url      string
	pkiDir   string
	ca       *pki.CA
	// certFile and keyFile are the serving certificate; tokenFile the
	// static tokens.
	certFile, keyFile, tokenFile string
	// etcd is the embedded etcd, nil with --etcd-servers; storage is how
	// to reach whichever it is.
	etcd    *etcd.Embedded
	storage etcdAccess
}

// etcdAccess is etcd's endpoints and the client's TLS files.
type etcdAccess struct {
	endpoints         []string
	caFile, cert, key string
}

// Config makes what the server runs on: it listens first, so that an
// occupied port fails fast and clearly, then makes the PKI and starts or
// reaches etcd. On error nothing is left open.
func (o Options) Config(ctx context.Context) (*Config, error) {
	c := &Config{opts: o, pkiDir: filepath.Join(o.DataDir, "pki")}
	var err error
	if c.alloc, err = service.NewAllocators(o.ServiceCIDR, o.NodePortRange); err != nil {
		return nil, err
	}
	if err := privateDir(o.DataDir); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := c.listen(); err != nil {
		return nil, err
	}
	if err := c.makePKI(); err != nil {
		c.close()
		return nil, err
	}
	if err := c.startStorage(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// listen opens the secure port (or takes the inherited listener) and the
// extra listeners in network namespaces.
func (c *Config) listen() error {
	o := c.opts
	listener := o.Listener
	if listener != nil {
		a, ok := listener.Addr().(*net.TCPAddr)
		if !ok {
			return fmt.Errorf("the inherited listener is not TCP: %v", listener.Addr())
		}
		c.port = a.Port
	} else {
		var err error
		if listener, c.port, err = genericoptions.CreateListener("tcp", net.JoinHostPort(o.BindAddress, strconv.Itoa(o.SecurePort)), net.ListenConfig{}); err != nil {
			return fmt.Errorf("cannot serve on %s:%d: %w", o.BindAddress, o.SecurePort, err)
		}
	}
	if len(o.AlsoListen) > 0 {
		extra, err := listenExtra(o.AlsoListen)
		if err != nil {
			listener.Close()
			return err
		}
		listener = newMultiListener(append([]net.Listener{listener}, extra...)...)
	}
	c.listener = listener
	host := o.BindAddress
	if net.ParseIP(o.BindAddress).IsUnspecified() {
		host = "127.0.0.1"
	}
	c.url = "https://" + net.JoinHostPort(host, strconv.Itoa(c.port))
	return nil
}

// makePKI makes or reads the CA, the serving certificate for every name
// and address the server is reached at, and the static token file.
func (c *Config) makePKI() error {
	o := c.opts
	ca, err := pki.EnsureCA(c.pkiDir)
	if err != nil {
		return fmt.Errorf("certificate authority: %w", err)
	}
	c.ca = ca
	hosts := append([]string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", c.alloc.IPs.Nth(0).String()}, o.TLSSANs...)
	if !net.ParseIP(o.BindAddress).IsUnspecified() {
		hosts = append(hosts, o.BindAddress)
	}
	if o.AdvertiseAddress != "" {
		hosts = append(hosts, o.AdvertiseAddress)
	}
	for _, e := range o.AlsoListen {
		if h, _, err := net.SplitHostPort(e.Addr); err == nil {
			hosts = append(hosts, h)
		}
	}
	if c.certFile, c.keyFile, err = ca.EnsureServingCert(c.pkiDir, hosts); err != nil {
		return err
	}
	c.tokenFile = o.TokenAuthFile
	if c.tokenFile == "" {
		c.tokenFile = filepath.Join(c.pkiDir, "tokens.csv")
		if _, err := ensureTokenFile(c.tokenFile); err != nil {
			return err
		}
	}
	return nil
}

// startStorage starts the embedded etcd, with certificates of its own,
// unless --etcd-servers names an external one.
func (c *Config) startStorage(ctx context.Context) error {
	o := c.opts
	if len(o.EtcdServers) > 0 {
		c.storage = etcdAccess{endpoints: o.EtcdServers, caFile: o.EtcdCAFile, cert: o.EtcdCertFile, key: o.EtcdKeyFile}
		return nil
	}
	f, err := pki.EnsureEtcd(c.pkiDir)
	if err != nil {
		return err
	}
	c.etcd, err = etcd.Start(ctx, filepath.Join(o.DataDir, "etcd"),
		etcd.TLS{CA: f.CA, ServerCert: f.ServerCert, ServerKey: f.ServerKey, PeerCert: f.PeerCert, PeerKey: f.PeerKey})
	if err != nil {
		return err
	}
	c.storage = etcdAccess{endpoints: c.etcd.Endpoints, caFile: f.CA, cert: f.ClientCert, key: f.ClientKey}
	return nil
}

// close releases what Config opened: the embedded etcd, and the listener
// until a server has taken it.
func (c *Config) close() {
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.listener != nil {
		c.listener.Close()
	}
}
