package controller

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/gateway"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// DefaultController is the spec.controller of svcnet's IngressClasses.
const DefaultController = "svcnet.dev/ingress"

// Options are the command line of `svcnet ingress`; names follow
// ingress-nginx's flags where it has one.
type Options struct {
	Kubeconfig      string
	IngressClass    string // the class name (and the deprecated annotation's value)
	ControllerClass string // spec.controller of our IngressClasses
	HTTPAddress     string
	HTTPSAddress    string // "0" or "" serves no HTTPS
	PublishService  string // namespace/name
	WatchNamespace  string // "" for all
	// DefaultSSLCertificate is a kubernetes.io/tls Secret (namespace/name)
	// served when no Ingress's certificate matches; a self-signed one
	// made at start otherwise.
	DefaultSSLCertificate string
	MetricsAddress        string // /metrics, /healthz, /readyz
	AccessLog             string // "-" for stdout, "off", or a file
	ConnectTimeout        time.Duration
	ReadTimeout           time.Duration
	SendTimeout           time.Duration
	ProxyBodySize         string // nginx's size syntax: 1m, 512k, 0 for no limit
	MaxConnections        int
	EventLoops            int // 0: proxy.DefaultEventLoops
	// Profiling adds /debug/pprof to the metrics address (off by default:
	// a profile costs CPU on demand).
	Profiling bool
	// GatewayController is the spec.controllerName of the GatewayClasses
	// served; "" serves no Gateway API.
	GatewayController string
	// PublishProgrammed keeps a Lease of what the proxy's endpoint sets
	// reflect (internal/programmed), which node agents wait for before
	// they stop a pod; only when watching every namespace.
	PublishProgrammed bool
	// KubeAPIQPS and KubeAPIBurst bound the controller's requests to
	// the API server: its writes are one per Ingress, Gateway and route
	// whose status changes, so client-go's 5 per second would take
	// minutes for 1,000 routes.
	KubeAPIQPS   float32
	KubeAPIBurst int
}

// Defaults are what `svcnet ingress` runs with when a flag is not given.
func Defaults() Options {
	return Options{
		IngressClass:      "svcnet",
		ControllerClass:   DefaultController,
		HTTPAddress:       ":80",
		HTTPSAddress:      ":443",
		MetricsAddress:    "127.0.0.1:10254",
		AccessLog:         "-",
		ConnectTimeout:    5 * time.Second,
		ReadTimeout:       60 * time.Second,
		SendTimeout:       60 * time.Second,
		ProxyBodySize:     "1m",
		MaxConnections:    10000,
		PublishProgrammed: true,
		GatewayController: string(gateway.ControllerName),
		KubeAPIQPS:        50,
		KubeAPIBurst:      100,
	}
}

// config is Options checked and parsed.
type config struct {
	Options
	publish        types.NamespacedName
	defaultCert    types.NamespacedName
	bodyLimit      int64 // -1: none
	https, metrics bool
}

func off(a string) bool { return a == "" || a == "0" }

func (o Options) parse() (*config, error) {
	c := &config{Options: o, https: !off(o.HTTPSAddress), metrics: !off(o.MetricsAddress)}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Kubeconfig == "" && !kubeclient.InPod() {
		bad("--kubeconfig is required outside a pod (in a pod, the ServiceAccount's token is the default)")
	}
	if msgs := validation.IsDNS1123Subdomain(o.IngressClass); len(msgs) > 0 {
		bad("--ingress-class %q: %s", o.IngressClass, strings.Join(msgs, "; "))
	}
	if o.ControllerClass == "" || !strings.Contains(o.ControllerClass, "/") {
		bad("--controller-class %q: a domain-prefixed path such as %s", o.ControllerClass, DefaultController)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		bad("--kube-api-qps %v and --kube-api-burst %d: both must be positive", o.KubeAPIQPS, o.KubeAPIBurst)
	}
	if g := o.GatewayController; g != "" {
		domain, path, ok := strings.Cut(g, "/")
		if !ok || path == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
			bad("--gateway-controller %q: a domain-prefixed path such as %s, or empty for no Gateway API", g, gateway.ControllerName)
		}
	}
	for _, a := range []struct{ flag, addr string }{{"--http-address", o.HTTPAddress}, {"--https-address", o.HTTPSAddress}, {"--metrics-address", o.MetricsAddress}} {
		if off(a.addr) && a.flag == "--http-address" {
			bad("--http-address is required")
			continue
		}
		if !off(a.addr) {
			if _, _, err := net.SplitHostPort(a.addr); err != nil {
				bad("%s %q: %v", a.flag, a.addr, err)
			}
		}
	}
	var err error
	if o.PublishService != "" {
		if c.publish, err = namespacedName(o.PublishService); err != nil {
			bad("--publish-service: %v", err)
		}
	}
	if o.DefaultSSLCertificate != "" {
		if c.defaultCert, err = namespacedName(o.DefaultSSLCertificate); err != nil {
			bad("--default-ssl-certificate: %v", err)
		}
	}
	if o.WatchNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.WatchNamespace); len(msgs) > 0 {
			bad("--watch-namespace %q: %s", o.WatchNamespace, strings.Join(msgs, "; "))
		}
	}
	if o.ConnectTimeout <= 0 || o.ReadTimeout <= 0 {
		bad("--proxy-connect-timeout and --proxy-read-timeout must be positive")
	}
	if o.SendTimeout <= 0 {
		bad("--send-timeout %v: must be positive", o.SendTimeout)
	}
	if c.bodyLimit, err = annotations.ParseSize(o.ProxyBodySize); err != nil {
		bad("--proxy-body-size: %v", err)
	}
	if o.EventLoops < 0 {
		bad("--event-loops %d: 0 (the default) or more", o.EventLoops)
	}
	if o.MaxConnections < 1 {
		bad("--max-connections %d: at least 1", o.MaxConnections)
	}
	return c, errors.Join(errs...)
}

func namespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("%q is not namespace/name", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
