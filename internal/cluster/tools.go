package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/svcnet/svcnet/internal/kubeclient"
)

// ExecOptions are what `svcnet exec` runs where.
type ExecOptions struct {
	Name   string   // cluster
	Target string   // client, edge, node/NODE or NAMESPACE/POD
	Argv   []string // command
	Stdin  bool
	TTY    bool
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
}

// ExitError carries the exit code of the remote command.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("command exited with code %d", e.Code) }

// Exec runs a command in one of the cluster's hosts or pods.
func Exec(ctx context.Context, o ExecOptions) error {
	st := StateOf(o.Name)
	opts, err := st.ReadOptions()
	if err != nil {
		return fmt.Errorf("no cluster %q: %w", o.Name, err)
	}
	plan, err := opts.plan()
	if err != nil {
		return err
	}
	var netnsName string
	switch {
	case o.Target == "client":
		netnsName = plan.ClientNetns()
	case o.Target == "edge":
		netnsName = plan.EdgeNetns()
	case strings.HasPrefix(o.Target, "node/"):
		n, ok := plan.Node(strings.TrimPrefix(o.Target, "node/"))
		if !ok {
			return fmt.Errorf("no node %q in cluster %q", strings.TrimPrefix(o.Target, "node/"), o.Name)
		}
		netnsName = n.Netns
	case strings.HasPrefix(o.Target, "cp/"):
		i := slices.IndexFunc(plan.ControlPlanes, func(cp ControlPlanePlan) bool { return cp.Name == strings.TrimPrefix(o.Target, "cp/") })
		if i < 0 {
			return fmt.Errorf("no control-plane host %q in cluster %q (svcnet up --control-planes 3 makes cp-1 … cp-3)", strings.TrimPrefix(o.Target, "cp/"), o.Name)
		}
		netnsName = plan.ControlPlanes[i].Netns
	case strings.Count(o.Target, "/") == 1:
		ns, pod, _ := strings.Cut(o.Target, "/")
		return execPod(ctx, st, ns, pod, o)
	default:
		return fmt.Errorf("target %q: want client, edge, node/NODE, cp/cp-N or NAMESPACE/POD", o.Target)
	}
	if os.Geteuid() != 0 {
		return errors.New("entering the cluster's namespaces needs root (run it with sudo)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"internal", "netns-exec", "--netns", netnsName, "--"}, o.Argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.In, o.Out, o.Err
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ExitError{Code: ee.ExitCode()}
		}
		return err
	}
	return nil
}

// execPod runs the command in a pod's container through the API server,
// exactly as kubectl exec does, so it has the container's environment.
func execPod(ctx context.Context, st State, ns, pod string, o ExecOptions) error {
	cfg, client, err := st.client()
	if err != nil {
		return err
	}
	req := client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: o.Argv, Stdin: o.Stdin, Stdout: true, Stderr: !o.TTY, TTY: o.TTY},
			scheme.ParameterCodec)
	e, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	streams := remotecommand.StreamOptions{Stdout: o.Out, Tty: o.TTY}
	if o.Stdin {
		streams.Stdin = o.In
	}
	if !o.TTY {
		streams.Stderr = o.Err
	}
	err = e.StreamWithContext(ctx, streams)
	var code interface{ ExitStatus() int }
	if errors.As(err, &code) {
		return ExitError{Code: code.ExitStatus()}
	}
	return err
}

// Status prints the cluster's nodes, pods and services at a glance.
func Status(ctx context.Context, name string, out io.Writer) error {
	st := StateOf(name)
	if !st.Exists() {
		return fmt.Errorf("no cluster %q (svcnet up --name %s creates it)", name, name)
	}
	running := "running"
	if st.supervisorPid() == 0 {
		running = "NOT RUNNING (its supervisor is gone; svcnet down --name " + name + " cleans up)"
	}
	fmt.Fprintf(out, "Cluster %q: %s\nKubeconfig: %s\n\n", name, running, st.Kubeconfig())
	_, client, err := st.client()
	if err != nil {
		return err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tSTATUS\tADDRESS\tPOD CIDR")
	for _, n := range nodes.Items {
		status := "NotReady"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
		addr := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addr = a.Address
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n.Name, status, addr, n.Spec.PodCIDR)
	}
	w.Flush()
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(w, "POD\tREADY\tSTATUS\tNODE\tIP")
	for _, p := range pods.Items {
		ready, total := 0, len(p.Spec.Containers)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		fmt.Fprintf(w, "%s/%s\t%d/%d\t%s\t%s\t%s\n", p.Namespace, p.Name, ready, total, phase, p.Spec.NodeName, p.Status.PodIP)
	}
	w.Flush()
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(w, "SERVICE\tTYPE\tCLUSTER-IP\tEXTERNAL-IP\tPORTS")
	for _, s := range svcs.Items {
		var ports []string
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				ports = append(ports, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
			} else {
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
		}
		var ext []string
		for _, i := range s.Status.LoadBalancer.Ingress {
			ext = append(ext, i.IP)
		}
		ext = append(ext, s.Spec.ExternalIPs...)
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			ext = []string{s.Spec.ExternalName}
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Spec.Type, s.Spec.ClusterIP, strings.Join(ext, ","), strings.Join(ports, ","))
	}
	return w.Flush()
}

// client is an admin client of the cluster, and its config.
func (s State) client() (*rest.Config, kubernetes.Interface, error) {
	client, cfg, err := kubeclient.New(s.Kubeconfig(), kubeclient.Options{UserAgent: "svcnet"})
	return cfg, client, err
}
