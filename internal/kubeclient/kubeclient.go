// Package kubeclient makes the client-go clientset every svcnet component
// talks to the API with, from a kubeconfig, the same way for all of them:
// a user agent of its own, its request budget, API warnings not printed
// (components log what matters), and protobuf where a component decodes
// much (it costs a third of JSON to decode).
package kubeclient

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are what differs between components.
type Options struct {
	UserAgent string
	// QPS and Burst bound requests; zero keeps client-go's defaults.
	QPS   float32
	Burst int
	// Protobuf asks for protobuf (JSON where the server has none).
	Protobuf bool
}

// InPod reports whether this process runs in a pod, where a component
// without a kubeconfig uses its ServiceAccount's token (in-cluster
// configuration), as CoreDNS and ingress-nginx do.
func InPod() bool { return os.Getenv("KUBERNETES_SERVICE_HOST") != "" }

// New reads the kubeconfig and returns a clientset and its config; with
// no kubeconfig, in a pod, the pod's ServiceAccount credentials.
func New(kubeconfig string, o Options) (kubernetes.Interface, *rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, nil, fmt.Errorf("no --kubeconfig, and no in-cluster credentials: %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = o.UserAgent
	if o.QPS > 0 {
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	if o.Protobuf {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, cfg, nil
}
