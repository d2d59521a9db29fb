package core

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// NodeConnection says how the API server reaches the node agent that runs
// a pod (kubelet's port), for logs and exec.
type NodeConnection interface {
	// Location is the base URL of the node's agent.
	Location(ctx context.Context, node string) (*url.URL, error)
	// Transport dials node agents (in the cluster's network) and
	// authenticates to them.
	Transport() http.RoundTripper
}

// PodNode is what the pod subresources that a node agent serves hold:
// the pods, to find a pod's node, and the connection to nodes. Each is
// a subresource of Pod.
type PodNode struct {
	Pods  *genericregistry.Store
	Nodes NodeConnection
}

func (PodNode) New() runtime.Object { return &corev1.Pod{} }
func (PodNode) Destroy()            {}

// nodeTarget finds the pod, its container (the only one when none is
// named) and the base URL of its node's agent.
func nodeTarget(ctx context.Context, pods *genericregistry.Store, nodes NodeConnection, name, container string) (*corev1.Pod, string, *url.URL, error) {
	if nodes == nil {
		return nil, "", nil, apierrors.NewServiceUnavailable("this API server has no connection to node agents (start it with --kubelet-connection)")
	}
	pod, err := podNode(ctx, pods, name)
	if err != nil {
		return nil, "", nil, err
	}
	if container, err = defaultContainer(pod, container); err != nil {
		return nil, "", nil, err
	}
	loc, err := nodes.Location(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, "", nil, err
	}
	return pod, container, loc, nil
}

// podNode finds the node a running pod is on.
func podNode(ctx context.Context, pods *genericregistry.Store, name string) (*corev1.Pod, error) {
	obj, err := pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	return pod, nil
}

// defaultContainer picks the only container, or says which to choose.
func defaultContainer(pod *corev1.Pod, container string) (string, error) {
	if container != "" {
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if c.Name == container {
				return container, nil
			}
		}
		// As kube-apiserver; and the name goes into the node's URL.
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name, nil
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names))
}

// LogREST serves pods/log by streaming from the pod's node agent.
type LogREST struct{ PodNode }

// NewGetOptions implements rest.GetterWithOptions.
func (r *LogREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// ProducesMIMETypes and ProducesObject describe the stream to OpenAPI.
func (r *LogREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }
func (r *LogREST) ProducesObject(string) any         { return "" }

// Get streams the logs of a container.
func (r *LogREST) Get(ctx context.Context, name string, opts runtime.Object) (runtime.Object, error) {
	o := opts.(*corev1.PodLogOptions)
	pod, container, loc, err := nodeTarget(ctx, r.Pods, r.Nodes, name, o.Container)
	if err != nil {
		return nil, err
	}
	loc.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
	q := url.Values{}
	for k, v := range map[string]bool{"follow": o.Follow, "previous": o.Previous, "timestamps": o.Timestamps} {
		if v {
			q.Set(k, "true")
		}
	}
	for k, v := range map[string]*int64{"tailLines": o.TailLines, "limitBytes": o.LimitBytes, "sinceSeconds": o.SinceSeconds} {
		if v != nil {
			q.Set(k, strconv.FormatInt(*v, 10))
		}
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	loc.RawQuery = q.Encode()
	return &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       r.Nodes.Transport(),
		ContentType:     "text/plain",
		Flush:           o.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(Pod.Resource, name),
	}, nil
}

// ExecREST serves pods/exec by proxying the stream to the node agent.
type ExecREST struct{ PodNode }

// NewConnectOptions implements rest.Connecter.
func (r *ExecREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodExecOptions{}, false, ""
}

// ConnectMethods implements rest.Connecter.
func (r *ExecREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// Connect returns the handler that upgrades the connection and pipes it
// to the node agent.
func (r *ExecREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o := opts.(*corev1.PodExecOptions)
	if len(o.Command) == 0 {
		return nil, apierrors.NewBadRequest("you must specify at least 1 command")
	}
	return r.connectStream(ctx, name, "exec", "exec into", url.Values{"command": o.Command},
		streams{o.Container, o.Stdin, o.Stdout, o.Stderr, o.TTY}, responder)
}

// AttachREST serves pods/attach (kubectl attach, kubectl run -i) by
// proxying the stream to the node agent, which joins the container's
// shim.
type AttachREST struct{ PodNode }

// NewConnectOptions implements rest.Connecter.
func (r *AttachREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodAttachOptions{}, false, ""
}

// ConnectMethods implements rest.Connecter.
func (r *AttachREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// Connect returns the handler that upgrades the connection and pipes it
// to the node agent, SPDY or WebSocket as for exec.
func (r *AttachREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o := opts.(*corev1.PodAttachOptions)
	return r.connectStream(ctx, name, "attach", "attach to", nil,
		streams{o.Container, o.Stdin, o.Stdout, o.Stderr, o.TTY}, responder)
}

// streams are the container and the streams exec or attach asks for.
type streams struct {
	container                  string
	stdin, stdout, stderr, tty bool
}

// connectStream is exec's and attach's Connect: s of the pod's container,
// through the node agent's /<sub>/<namespace>/<pod>/<container> with
// query, if any. A pod that has completed is refused ("cannot <verb> a
// container in a completed pod").
func (p PodNode) connectStream(ctx context.Context, name, sub, verb string, query url.Values, s streams, responder rest.Responder) (http.Handler, error) {
	pod, container, loc, err := nodeTarget(ctx, p.Pods, p.Nodes, name, s.container)
	if err != nil {
		return nil, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", verb, pod.Status.Phase))
	}
	loc.Path = fmt.Sprintf("/%s/%s/%s/%s", sub, pod.Namespace, pod.Name, container)
	if query != nil {
		loc.RawQuery = query.Encode()
	}
	return streamToNode(loc, p.Nodes.Transport(), responder, s.stdin, s.stdout, s.stderr, s.tty), nil
}

// streamToNode proxies an exec or attach stream to the node agent.
func streamToNode(loc *url.URL, transport http.RoundTripper, responder rest.Responder, stdin, stdout, stderr, tty bool) http.Handler {
	q := loc.Query()
	for k, v := range map[string]bool{"input": stdin, "output": stdout, "error": stderr, "tty": tty} {
		if v {
			q.Set(k, "1")
		}
	}
	loc.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(loc, transport, false, true, proxy.NewErrorResponder(responder))
	// The client's connection ends only once the client has read all
	// (draining: without, a slow kubectl lost the tail of the output).
	spdy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upgrade.ServeHTTP(draining{w}, r) })
	// kubectl 1.30+ speaks WebSocket (v5.channel.k8s.io); like
	// kube-apiserver, translate it to SPDY towards the node.
	translator := apiproxy.NewStreamTranslatorHandler(loc, transport, 0,
		apiproxy.Options{Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty})
	return apiproxy.NewTranslatingHandler(spdy, translator, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
}

// PortForwardREST serves pods/portforward by proxying the streams to the
// node agent.
type PortForwardREST struct{ PodNode }

// NewConnectOptions implements rest.Connecter.
func (r *PortForwardREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodPortForwardOptions{}, false, ""
}

// ConnectMethods implements rest.Connecter.
func (r *PortForwardREST) ConnectMethods() []string { return []string{"GET", "POST"} }

// Connect returns the handler that upgrades the connection and pipes it
// to the node agent: SPDY as it comes, and kubectl 1.31+'s WebSocket
// (SPDY tunnelled in WebSocket frames) unwrapped, as kube-apiserver does.
func (r *PortForwardREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o := opts.(*corev1.PodPortForwardOptions)
	if r.Nodes == nil {
		return nil, apierrors.NewServiceUnavailable("this API server has no connection to node agents (start it with --kubelet-connection)")
	}
	pod, err := podNode(ctx, r.Pods, name)
	if err != nil {
		return nil, err
	}
	loc, err := r.Nodes.Location(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	if pod.Status.Phase != corev1.PodRunning {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to forward port because pod is not running. Current status=%v", pod.Status.Phase))
	}
	loc.Path = fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name)
	q := url.Values{}
	for _, p := range o.Ports {
		q.Add("port", strconv.Itoa(int(p)))
	}
	loc.RawQuery = q.Encode()
	upgrade := proxy.NewUpgradeAwareHandler(loc, r.Nodes.Transport(), false, true, proxy.NewErrorResponder(responder))
	return apiproxy.NewTranslatingHandler(upgrade, apiproxy.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}

var (
	_ rest.GetterWithOptions = (*LogREST)(nil)
	_ rest.Connecter         = (*ExecREST)(nil)
	_ rest.Connecter         = (*AttachREST)(nil)
	_ rest.Connecter         = (*PortForwardREST)(nil)
)
