package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/ingress/controller"
)

func newIngressCommand() *cobra.Command {
	o := controller.Defaults()
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Route HTTP and HTTPS by Ingress rules to the pods of Services, without reloads",
		Long: `The ingress controller and its proxy in one process: it watches the Ingresses of its
class (spec.ingressClassName naming an IngressClass whose spec.controller is
--controller-class, the kubernetes.io/ingress.class annotation, or the default
IngressClass), Services, EndpointSlices and TLS Secrets, and routes each request by
host and path (networking.k8s.io/v1 rules) straight to a ready pod of the backend,
never through the ClusterIP. Changes swap an immutable routing table and endpoint
sets; listeners never restart. HTTPS certificates are chosen by SNI from the
Ingresses' spec.tls Secrets. /metrics, /healthz and /readyz are on --metrics-address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return controller.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
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
	f.StringVar(&o.ProxyBodySize, "proxy-body-size", o.ProxyBodySize, "largest request body accepted (413 beyond), nginx syntax: 1m, 512k, 0 for no limit")
	f.BoolVar(&o.Profiling, "profiling", false, "also serve /debug/pprof on the metrics address")
	f.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "client connections served at once; more are answered 503")
	f.IntVar(&o.EventLoops, "event-loops", o.EventLoops, "event loops serving plain HTTP/1.1, each on one core at most, as nginx's worker processes (0: half the CPUs, at least one)")
	return cmd
}
