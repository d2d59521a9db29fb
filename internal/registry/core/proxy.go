package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
)

// proxyMethods are the methods pods/proxy and services/proxy pass on.
var proxyMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// nodeProxy sends a request to ip:port through the agent of the node
// that can reach it (the API server has no route to pod addresses).
func nodeProxy(ctx context.Context, nodes NodeConnection, node, scheme, ip string, port int, subpath string, responder rest.Responder) (http.Handler, error) {
	if nodes == nil {
		return nil, apierrors.NewServiceUnavailable("this API server has no connection to node agents (start it with --kubelet-connection)")
	}
	loc, err := nodes.Location(ctx, node)
	if err != nil {
		return nil, err
	}
	if scheme == "" {
		scheme = "http"
	}
	loc.Path = path.Join("/proxy", scheme, ip, strconv.Itoa(port)) + "/" + strings.TrimLeft(subpath, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As kube-apiserver: absolute links and redirects in what the
		// backend answers are rewritten to stay under the proxy's path
		// (<a href="/x"> becomes …/proxy/x).
		rewrite := &proxy.Transport{PathPrepend: proxyPrefix(r.URL.Path), RoundTripper: nodes.Transport()}
		h := proxy.NewUpgradeAwareHandler(loc, rewrite, false, false, proxy.NewErrorResponder(responder))
		// A GET or HEAD of …/proxy (no path) is sent to …/proxy/ with a
		// permanent redirect, so that relative links resolve under it.
		if subpath == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasSuffix(r.URL.Path, "/") {
			to := r.URL.Path + "/"
			if r.URL.RawQuery != "" {
				to += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", to)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// proxyPrefix is the API path of a proxy request up to its …/proxy:
// /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy.
func proxyPrefix(p string) string {
	segs := strings.Split(p, "/")
	for i := 0; i+2 < len(segs); i++ {
		if (segs[i] == "pods" || segs[i] == "services") && segs[i+2] == "proxy" {
			return strings.Join(segs[:i+3], "/")
		}
	}
	return ""
}

// PodProxyREST is pods/proxy: HTTP to a port of the pod
// ("name", "name:port" or "scheme:name:port").
type PodProxyREST struct{ PodNode }

// NewConnectOptions implements rest.Connecter; the rest of the URL is the path.
func (r *PodProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodProxyOptions{}, true, "path"
}

// ConnectMethods implements rest.Connecter.
func (r *PodProxyREST) ConnectMethods() []string { return proxyMethods }

// Connect implements rest.Connecter.
func (r *PodProxyREST) Connect(ctx context.Context, id string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	scheme, name, portStr, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	pod, err := podNode(ctx, r.Pods, name)
	if err != nil {
		return nil, err
	}
	if pod.Status.PodIP == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s has no address yet", name))
	}
	if portStr == "" {
		portStr = "80"
		// Kubernetes' choice: the first port a container declares.
	first:
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				portStr = strconv.Itoa(int(p.ContainerPort))
				break first
			}
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q", portStr))
	}
	return nodeProxy(ctx, r.Nodes, pod.Spec.NodeName, scheme, pod.Status.PodIP, port, opts.(*corev1.PodProxyOptions).Path, responder)
}

// ServiceProxyREST is services/proxy: HTTP to one ready endpoint of a
// Service port ("name", "name:port" or "scheme:name:port", the port by
// name or number).
type ServiceProxyREST struct {
	Service func(ctx context.Context, name string) (*corev1.Service, error)
	Slices  func(ctx context.Context, service string) ([]discoveryv1.EndpointSlice, error)
	Nodes   NodeConnection
}

func (r *ServiceProxyREST) New() runtime.Object { return &corev1.Service{} }
func (r *ServiceProxyREST) Destroy()            {}

// NewConnectOptions implements rest.Connecter.
func (r *ServiceProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.ServiceProxyOptions{}, true, "path"
}

// ConnectMethods implements rest.Connecter.
func (r *ServiceProxyREST) ConnectMethods() []string { return proxyMethods }

// Connect implements rest.Connecter.
func (r *ServiceProxyREST) Connect(ctx context.Context, id string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	scheme, name, portStr, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", id))
	}
	svc, err := r.Service(ctx, name)
	if err != nil {
		return nil, err
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (portStr == "" && len(svc.Spec.Ports) == 1) || p.Name == portStr || strconv.Itoa(int(p.Port)) == portStr {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", portStr, name))
	}
	slices, err := r.Slices(ctx, name)
	if err != nil {
		return nil, err
	}
	type target struct {
		ip, node string
		port     int
	}
	var ready []target
	for _, s := range slices {
		var port int
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == sp.Name && p.Port != nil {
				port = int(*p.Port)
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil && len(e.Addresses) > 0 {
				ready = append(ready, target{e.Addresses[0], *e.NodeName, port})
			}
		}
	}
	if len(ready) == 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	t := ready[rand.IntN(len(ready))]
	return nodeProxy(ctx, r.Nodes, t.node, scheme, t.ip, t.port, opts.(*corev1.ServiceProxyOptions).Path, responder)
}

var (
	_ rest.Connecter = (*PodProxyREST)(nil)
	_ rest.Connecter = (*ServiceProxyREST)(nil)
)
