// Package apiserver assembles svcnet's Kubernetes API server: the generic
// server machinery of k8s.io/apiserver (REST verbs, watch, content types,
// discovery, OpenAPI, the watch cache) over svcnet's registry of kinds,
// with etcd as storage and svcnet's own authentication and authorization.
package apiserver

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/apiserver/openapi"
	"github.com/svcnet/svcnet/internal/etcd"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/rbac"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/satoken"
)

// KubernetesVersion is the Kubernetes API level svcnet serves.
const KubernetesVersion = "1.37.2"

// Options configure the API server. Flag names follow kube-apiserver.
type Options struct {
	DataDir          string // etcd data, PKI, kubeconfigs
	BindAddress      string // --bind-address
	SecurePort       int    // --secure-port
	AdvertiseAddress string // --advertise-address: address of default/kubernetes endpoints
	// EndpointReconcilerType is "lease" (default/kubernetes lists every
	// API server with a live lease in etcd, kube-apiserver's default) or
	// "none" (nothing written).
	EndpointReconcilerType string
	WriteKubeconfig        string   // admin kubeconfig path
	EtcdServers            []string // --etcd-servers; empty = embedded etcd
	// EtcdCAFile, EtcdCertFile, EtcdKeyFile secure the connection to an
	// external etcd (--etcd-cafile, --etcd-certfile, --etcd-keyfile).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	ServiceCIDR                           string // --service-cluster-ip-range
	NodePortRange                         string // --service-node-port-range
	// AllocationRepairInterval is how often the record of cluster IPs
	// and node ports is checked against the Services (kube-apiserver:
	// every 3 minutes).
	AllocationRepairInterval time.Duration
	// EventTTL is how long an Event is kept after its last write
	// (kube-apiserver's --event-ttl, an hour by default).
	EventTTL      time.Duration
	TokenAuthFile string   // --token-auth-file; default: generated in DataDir
	TLSSANs       []string // extra names and addresses of the serving certificate
	// AlsoListen are extra addresses inside network namespaces; New adds
	// those of AlsoListenAt (--also-listen NETNS/HOST:PORT).
	AlsoListen   []NetnsListen
	AlsoListenAt []string
	// Nodes say how to reach node agents for pods/log and pods/exec.
	Nodes NodeOptions
	// EtcdCompactionInterval is how often old revisions are compacted
	// (--etcd-compaction-interval, default 5m); older resourceVersions then
	// answer 410 Gone.
	EtcdCompactionInterval time.Duration
	// EncryptionProviderConfig is an EncryptionConfiguration file
	// (--encryption-provider-config): how resources are encrypted at rest.
	EncryptionProviderConfig string
	// Audit is kube-apiserver's audit options (--audit-log-path,
	// --audit-policy-file, …); nil records nothing.
	Audit *genericoptions.AuditOptions
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the
	// requests served at once (kube-apiserver's flags and defaults, 400
	// and 200); more get 429 with Retry-After.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// Listener, when set, is the secure port already bound (by svcnet
	// up's supervisor, which keeps it across restarts); SecurePort and
	// BindAddress then only describe it. New makes it from ListenFD
	// (--listen-fd), an inherited descriptor, when that is set.
	Listener net.Listener
	ListenFD int
}

// Defaults returns Options with kube-apiserver's defaults.
func Defaults() Options {
	home, _ := os.UserHomeDir()
	return Options{
		DataDir:                  filepath.Join(home, ".svcnet", "apiserver"),
		BindAddress:              "127.0.0.1",
		SecurePort:               6443,
		ServiceCIDR:              "10.96.0.0/12",
		NodePortRange:            "30000-32767",
		AllocationRepairInterval: 3 * time.Minute,
		EventTTL:                 time.Hour,
		EtcdCompactionInterval:   5 * time.Minute,
		Nodes:                    NodeOptions{Port: 10250},
		EndpointReconcilerType:   "lease",
		Audit:                    genericoptions.NewAuditOptions(),

		MaxRequestsInFlight:         400,
		MaxMutatingRequestsInFlight: 200,
	}
}

// Server is a prepared API server.
type Server struct {
	opts    Options
	generic *genericapiserver.GenericAPIServer
	etcd    *etcd.Embedded
	// URL is the server's address, e.g. https://127.0.0.1:6443.
	URL string
	// AdminKubeconfig is the path of the admin kubeconfig.
	AdminKubeconfig string
	// PKIDir holds the CA, which can sign more client credentials.
	PKIDir string
}

// build makes the server on c: the generic server's config (serving,
// authentication, authorization, OpenAPI, audit, storage), admission,
// svcnet's resources behind the CRD server, and the post-start hooks,
// each group added by a function of its own.
func (c *Config) build() (*Server, error) {
	opts := c.opts
	s := &Server{opts: opts, etcd: c.etcd, URL: c.url, PKIDir: c.pkiDir}
	config, auth, err := c.genericConfig()
	if err != nil {
		return nil, err
	}
	storageConfig, etcdOpts, err := c.storageTo(config)
	if err != nil {
		return nil, err
	}

	config.LoopbackClientConfig.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(config.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	informerFactory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New("default", "kube-system", "kube-public"))
	if err != nil {
		return nil, err
	}
	nsLifecycle.SetExternalKubeInformerFactory(informerFactory)
	nsLifecycle.SetExternalKubeClientSet(client)
	if err := nsLifecycle.ValidateInitialization(); err != nil {
		return nil, err
	}
	rbacLister := newInformerLister(informerFactory)
	auth.authz.rbacSynced = rbacLister.waitSynced
	config.AdmissionControl = admission.NewChainHandler(nsLifecycle, newServiceAccountAdmission(informerFactory),
		newDefaultIngressClass(informerFactory), newEscalation(auth.authz))

	res, err := buildResources(config.RESTOptionsGetter, c.alloc, opts.Nodes, c.ca,
		reviewers{authz: auth.authz, tokens: auth.tokens, audiences: config.Authentication.APIAudiences}, auth.signer, opts.EventTTL)
	if err != nil {
		return nil, err
	}
	auth.authz.PodNode = res.podNode
	policy := &policyHook{roles: defaultClusterRoles(res.served()), bindings: defaultClusterRoleBindings()}
	auth.authz.RBAC = &rbac.Authorizer{Lister: newDefaultsLister(rbacLister, policy.roles, policy.bindings)}
	auth.sa.serviceAccounts, auth.sa.pods = res.getter("", "serviceaccounts"), res.getter("", "pods")
	auth.sa.secrets, auth.sa.nodes = res.getter("", "secrets"), res.getter("", "nodes")

	// Unknown paths get a NotFound Status, as from kube-apiserver.
	notFound := notfoundhandler.New(config.Serializer, genericapifilters.NoMuxAndDiscoveryIncompleteKey)
	// Both servers list their groups in one aggregated discovery document.
	config.AggregatedDiscoveryGroupManager = discoveryendpoint.NewResourceManager("apis")
	crdServer, err := newCRDServer(config, informerFactory, storageConfig, etcdOpts, genericapiserver.NewEmptyDelegateWithCustomHandler(notFound))
	if err != nil {
		return nil, err
	}
	s.generic, err = config.Complete(informerFactory).New("svcnet-apiserver", crdServer.GenericAPIServer)
	if err != nil {
		return nil, err
	}
	if err := res.install(s.generic); err != nil {
		return nil, err
	}
	s.generic.AddPostStartHookOrDie("svcnet-crd-discovery", crdDiscovery(s.generic, crdServer.Informers))
	s.generic.AddPostStartHookOrDie("svcnet-crd-openapi", crdOpenAPI(s.generic, crdServer.Informers))
	b := &bootstrap{serviceIP: c.alloc.IPs.Nth(0), serviceCIDR: canonicalCIDR(opts.ServiceCIDR), advertise: opts.AdvertiseAddress, port: advertisedPort(opts, c.port)}
	s.generic.AddPostStartHookOrDie("svcnet-bootstrap", ensureHook("bootstrap not done yet", b.ensure))
	if err := s.addEndpointReconciler(config.RESTOptionsGetter, b); err != nil {
		return nil, err
	}
	s.generic.AddPostStartHookOrDie("rbac/bootstrap-roles", ensureHook("default RBAC policy not written yet", policy.ensure))
	s.generic.AddPostStartHookOrDie("svcnet-lifecycle-controllers", lifecycleControllers(c.ca.CertPEM))
	s.addAllocatorRepair(c.alloc, res)

	if err := s.writeKubeconfigs(c.ca, c.tokenFile); err != nil {
		return nil, err
	}
	return s, nil
}

// authParts are the pieces of authentication and authorization that the
// resources complete once they exist.
type authParts struct {
	authz  *Authorizer
	tokens authenticator.Token
	sa     *saTokens
	signer *satoken.Signer
}

// genericConfig is the generic server's config: serving on c's listener,
// client certificates, tokens and ServiceAccount tokens, svcnet's
// authorizer, OpenAPI, the handler chain, in-flight limits and audit.
func (c *Config) genericConfig() (*genericapiserver.Config, *authParts, error) {
	opts := c.opts
	config := genericapiserver.NewConfig(apis.Codecs)
	config.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString(KubernetesVersion, "", "")

	serving := genericoptions.NewSecureServingOptions().WithLoopback()
	serving.Listener = c.listener
	serving.BindAddress = net.ParseIP(opts.BindAddress)
	serving.BindPort = c.port
	serving.ServerCert.CertKey.CertFile = c.certFile
	serving.ServerCert.CertKey.KeyFile = c.keyFile
	if err := serving.ApplyTo(&config.SecureServing, &config.LoopbackClientConfig); err != nil {
		return nil, nil, fmt.Errorf("serving: %w", err)
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", c.ca.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	if err := config.Authentication.ApplyClientCert(clientCA, config.SecureServing); err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	saKey, err := pki.EnsureServiceAccountKey(c.pkiDir)
	if err != nil {
		return nil, nil, fmt.Errorf("service account key: %w", err)
	}
	auth := &authParts{authz: &Authorizer{}}
	if auth.signer, err = satoken.NewSigner(saKey, APIAudience); err != nil {
		return nil, nil, err
	}
	auth.sa = &saTokens{signer: auth.signer}
	if config.Authentication.Authenticator, auth.tokens, err = newAuthenticator(pool, c.tokenFile, auth.sa); err != nil {
		return nil, nil, err
	}
	config.Authentication.APIAudiences = authenticator.Audiences{APIAudience}
	config.Authorization.Authorizer = auth.authz
	genericapiserver.AuthorizeClientBearerToken(config.LoopbackClientConfig, &config.Authentication, &config.Authorization)

	namer := openapinamer.NewDefinitionNamer(apis.Scheme)
	config.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIConfig.Info.Title = "Kubernetes"
	config.OpenAPIConfig.Info.Version = "v" + KubernetesVersion
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	config.OpenAPIV3Config.Info.Title = "Kubernetes"
	config.OpenAPIV3Config.Info.Version = "v" + KubernetesVersion
	// As kube-apiserver: streams are long-running, not subject to the
	// request timeout (which cannot hijack a connection).
	config.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(
		sets.NewString("watch", "proxy"), sets.NewString("attach", "exec", "proxy", "log", "portforward"))
	config.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return withVersion(genericapiserver.DefaultBuildHandlerChain(withBadPatchAnswered(h), c))
	}
	if opts.AdvertiseAddress != "" {
		config.PublicAddress = net.ParseIP(opts.AdvertiseAddress)
	}
	config.MaxRequestsInFlight, config.MaxMutatingRequestsInFlight = opts.MaxRequestsInFlight, opts.MaxMutatingRequestsInFlight
	if opts.Audit != nil {
		if err := opts.Audit.ApplyTo(config); err != nil {
			return nil, nil, fmt.Errorf("audit: %w", err)
		}
	}
	return config, auth, nil
}

// storageTo gives config its storage: etcd, protobuf, encryption at rest.
func (c *Config) storageTo(config *genericapiserver.Config) (*storagebackend.Config, *genericoptions.EtcdOptions, error) {
	storageConfig := storagebackend.NewDefaultConfig("/registry", nil)
	storageConfig.Transport.ServerList = c.storage.endpoints
	storageConfig.Transport.TrustedCAFile = c.storage.caFile
	storageConfig.Transport.CertFile, storageConfig.Transport.KeyFile = c.storage.cert, c.storage.key
	if c.opts.EtcdCompactionInterval > 0 {
		storageConfig.CompactionInterval = c.opts.EtcdCompactionInterval
	}
	etcdOpts := genericoptions.NewEtcdOptions(storageConfig)
	etcdOpts.DefaultStorageMediaType = "application/vnd.kubernetes.protobuf"
	etcdOpts.EncryptionProviderConfigFilepath = c.opts.EncryptionProviderConfig
	resourceConfig := serverstorage.NewResourceConfig()
	resourceConfig.EnableVersions(apis.Scheme.PrioritizedVersionsAllGroups()...)
	factory := serverstorage.NewDefaultStorageFactory(*storageConfig, etcdOpts.DefaultStorageMediaType, apis.Codecs,
		serverstorage.NewDefaultResourceEncodingConfigForEffectiveVersion(apis.Scheme, config.EffectiveVersion), resourceConfig, nil)
	if err := etcdOpts.ApplyWithStorageFactoryTo(factory, config); err != nil {
		return nil, nil, fmt.Errorf("storage: %w", err)
	}
	return storageConfig, etcdOpts, nil
}

// addEndpointReconciler keeps default/kubernetes listing every API server
// with a live lease (--endpoint-reconciler-type lease, with an advertised
// address): the server is ready only once it is listed, and leaves the
// list before it shuts down.
func (s *Server) addEndpointReconciler(optsGetter generic.RESTOptionsGetter, b *bootstrap) error {
	opts := s.opts
	if opts.AdvertiseAddress == "" || opts.EndpointReconcilerType != "lease" {
		return nil
	}
	leases, err := newMasterLeases(optsGetter, masterLeaseTTL)
	if err != nil {
		return err
	}
	rec := &endpointReconciler{leases: leases, ip: opts.AdvertiseAddress, b: b, interval: masterLeaseInterval}
	client, err := kubernetes.NewForConfig(s.generic.LoopbackClientConfig)
	if err != nil {
		return err
	}
	s.generic.AddPostStartHookOrDie("svcnet-endpoint-reconciler", func(ctx genericapiserver.PostStartHookContext) error {
		// Ready only once this server is in the endpoints.
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			last = rec.reconcile(ctx, client, false)
			if last != nil {
				slog.Debug("default/kubernetes endpoints not written yet", "err", last)
			}
			return last == nil, nil
		})
		if err != nil {
			return fmt.Errorf("default/kubernetes endpoints: %w (last: %v)", err, last)
		}
		go func() {
			rec.run(ctx, client)
			leases.destroy()
		}()
		return nil
	})
	s.generic.AddPreShutdownHookOrDie("svcnet-endpoint-reconciler", func() error { return rec.leave(client) })
	return nil
}

// addAllocatorRepair checks the recorded cluster IPs and node ports
// against the Services at start, then every --allocation-repair-interval.
func (s *Server) addAllocatorRepair(alloc *service.Allocators, res *resources) {
	s.generic.AddPostStartHookOrDie("svcnet-allocator-repair", func(ctx genericapiserver.PostStartHookContext) error {
		if err := alloc.Repair(ctx); err != nil {
			return err
		}
		go func() {
			alloc.RunRepair(ctx, s.opts.AllocationRepairInterval)
			res.closeRecord()
		}()
		return nil
	})
}

// advertisedPort is the port of default/kubernetes' endpoints: the one the
// server listens on at the advertised address — an extra listener's in a
// network namespace when it has that address (svcnet up's in-cluster
// 172.18.0.1:6443, whatever port the host side took), else the secure port.
func advertisedPort(opts Options, securePort int) int {
	for _, l := range opts.AlsoListen {
		host, p, err := net.SplitHostPort(l.Addr)
		if err != nil || host != opts.AdvertiseAddress {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			return n
		}
	}
	return securePort
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	defer s.close()
	errCh := make(chan error, 1)
	if s.etcd != nil {
		go func() {
			if err := <-s.etcd.Err(); err != nil {
				errCh <- fmt.Errorf("embedded etcd: %w", err)
			}
		}()
	}
	go func() { errCh <- s.generic.PrepareRun().RunWithContext(ctx) }()
	slog.Info("API server serving", "url", s.URL, "kubeconfig", s.AdminKubeconfig)
	return <-errCh
}

func (s *Server) close() {
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// privateDir makes dir, which holds keys and etcd's data, the owner's
// only, as etcd insists on for its data directory. A shared directory
// (sticky, like /tmp) or one of another user is refused rather than
// changed.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if info.Mode()&os.ModeSticky != 0 || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is shared (mode %v): give the API server a directory of its own", dir, info.Mode())
	}
	return os.Chmod(dir, 0o700)
}

// canonicalCIDR is cidr as a ServiceCIDR names it (masked), or "" when
// it does not parse (the allocator has refused it by then).
func canonicalCIDR(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return p.Masked().String()
}
