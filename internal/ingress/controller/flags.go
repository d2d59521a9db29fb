package controller

import (
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/cliflags"
)

// AddFlags adds `svcnet ingress`'s flags for o to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API server (required)")
	f.StringVar(&o.IngressClass, "ingress-class", o.IngressClass, "the class name: Ingresses annotated kubernetes.io/ingress.class with it are served")
	f.StringVar(&o.ControllerClass, "controller-class", o.ControllerClass, "spec.controller of the IngressClasses served")
	f.StringVar(&o.HTTPAddress, "http-address", o.HTTPAddress, "address to serve HTTP on")
	f.StringVar(&o.HTTPSAddress, "https-address", o.HTTPSAddress, "address to serve HTTPS on (0 to disable)")
	f.StringVar(&o.PublishService, "publish-service", o.PublishService, "NAMESPACE/NAME of the Service whose addresses go into the status of served Ingresses")
	f.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "serve only the Ingresses of this namespace (default: all)")
	f.StringVar(&o.DefaultSSLCertificate, "default-ssl-certificate", o.DefaultSSLCertificate, "NAMESPACE/NAME of a kubernetes.io/tls Secret served to hosts without a certificate (default: a self-signed one made at start)")
	f.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "address of /metrics, /healthz and /readyz (0 to disable)")
	f.StringVar(&o.AccessLog, "access-log", o.AccessLog, "where to write one JSON line per request: - for stdout, off, or a file")
	f.DurationVar(&o.ConnectTimeout, "proxy-connect-timeout", o.ConnectTimeout, "how long connecting to a pod may take before the next one is tried")
	f.DurationVar(&o.ReadTimeout, "proxy-read-timeout", o.ReadTimeout, "how long a pod may take to send its response headers (504 after)")
	f.DurationVar(&o.SendTimeout, "send-timeout", o.SendTimeout, "how long a client may take none of its answer before its connection is closed (nginx's send_timeout: between two writes, not for the whole answer)")
	f.StringVar(&o.ProxyBodySize, "proxy-body-size", o.ProxyBodySize, "largest request body accepted (413 beyond), nginx syntax: 1m, 512k, 0 for no limit")
	f.BoolVar(&o.Profiling, "profiling", o.Profiling, "also serve /debug/pprof on the metrics address")
	f.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "client connections served at once; more are answered 503")
	f.IntVar(&o.EventLoops, "event-loops", o.EventLoops, "event loops serving plain HTTP/1.1, each on one core at most, as nginx's worker processes (0: half the CPUs, at least one)")
	f.StringVar(&o.GatewayController, "gateway-controller", o.GatewayController,
		"spec.controllerName of the GatewayClasses served (empty: no Gateway API); served once the API server serves the Gateway API's CRDs")
	f.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second to the API server (status writes are one per object)")
	f.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "requests to the API server at once above --kube-api-qps")
	f.BoolVar(&o.PublishProgrammed, "publish-programmed", o.PublishProgrammed,
		"keep a Lease (svcnet-ingress-<$POD_NAME or hostname> in $POD_NAMESPACE or kube-system) saying which EndpointSlice changes the endpoint sets reflect; node agents wait for it before stopping a pod (only without --watch-namespace)")
}

// Args is the command line of `svcnet ingress` with o: the flags whose values
// differ from the defaults.
func (o Options) Args() []string { return cliflags.Args(o, Defaults, (*Options).AddFlags) }
