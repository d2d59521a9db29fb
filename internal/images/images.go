// Package images is the set of container images built into svcnet. A
// node agent runs a container of a built-in image as the svcnet binary
// itself with the image's entrypoint (`svcnet image hostnames …`); the
// special image "host" runs a host executable named by the container's
// command. Anything else fails to pull, as an unknown image would.
package images

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Image is a built-in image.
type Image struct {
	Name string
	// Entrypoint is the svcnet subcommand (and its arguments) the image
	// runs; the container's args follow it.
	Entrypoint []string
	Doc        string
	// Run implements `svcnet image <short name>`; nil for images whose
	// entrypoint is another svcnet command.
	Run func(ctx context.Context, args []string) error
	// Aliases are other names the image answers to (the registries'
	// names of the images it stands for).
	Aliases []string
	// Argv, when set, makes the whole command line from the container's
	// command and args (images that run a program of the machine).
	Argv func(command, args []string) ([]string, error)
	// Cmd are the default args (an image's CMD): used when the container
	// names neither command nor args.
	Cmd []string
	// Programs are paths at which the image's containers find svcnet
	// itself, acting as the program the path names (agnhost's /agnhost):
	// for commands and scripts that call the image's program by path.
	Programs []string
}

// SvcnetProgram is where svcnet's own image has the binary.
const SvcnetProgram = "/usr/local/bin/svcnet"

// Host is the image that runs a host executable.
const Host = "host"

// Builtin lists the images, by name.
var Builtin = []Image{
	{Name: "svcnet/hostnames", Entrypoint: []string{"image", "hostnames"}, Run: runHostnames,
		Doc: "answers its pod's name over HTTP on port 9376 (the reference scenario)"},
	{Name: "svcnet/echo", Entrypoint: []string{"image", "echo"}, Run: runEcho,
		Doc: "HTTP, TCP and UDP echo server: /hostname, /clientip, /echo?msg=, /readyz (like agnhost netexec)"},
	{Name: "svcnet/svcnet", Programs: []string{SvcnetProgram}, Aliases: []string{"svcnet", "ghcr.io/svcnet/svcnet"},
		Doc: "svcnet itself, as `make image` builds it: " + SvcnetProgram + " is the entrypoint, the args are its command line (the manifests of deploy/)"},
	{Name: "svcnet/dns", Entrypoint: []string{"dns"},
		Doc: "the cluster DNS (svcnet dns)"},
	{Name: "svcnet/ingress", Entrypoint: []string{"ingress"},
		Doc: "the ingress controller (svcnet ingress)"},
	{Name: "pause", Entrypoint: []string{"image", "pause"}, Run: runPause,
		Aliases: []string{"registry.k8s.io/pause", "k8s.gcr.io/pause", "gcr.io/google-containers/pause"},
		Doc:     "does nothing until the pod stops (registry.k8s.io/pause)"},
	{Name: "agnhost", Entrypoint: []string{"image", "agnhost"}, Run: runAgnhost, Cmd: []string{"pause"}, Programs: []string{"/agnhost", "/agnhost-2", "/coredns"},
		Aliases: []string{"registry.k8s.io/e2e-test-images/agnhost", "k8s.gcr.io/e2e-test-images/agnhost", "gcr.io/kubernetes-e2e-test-images/agnhost"},
		Doc: "Kubernetes' e2e test image: the subcommands its network tests use (netexec, serve-hostname, porter, test-webserver, connect, pause, dns-suffix …) at /agnhost; " +
			"/coredns is the coredns image's program; " +
			"shell commands run the machine's programs (sh, curl, nc, dig)"},
	{Name: "coredns", Entrypoint: []string{"image", "coredns"}, Run: runCoreDNS, Programs: []string{"/coredns"},
		Aliases: []string{"registry.k8s.io/coredns/coredns", "coredns/coredns", "k8s.gcr.io/coredns/coredns"},
		Doc: "a stand-in for CoreDNS at /coredns (agnhost's /coredns too), with CoreDNS's command line (-conf FILE, else ./Corefile, else whoami on :53; -dns.port/-p, -pidfile, -quiet, -plugins, -version): " +
			"serves a Corefile's server blocks (ZONE[:PORT]) with the plugins hosts, forward (plain DNS to IP[:PORT] upstreams or a resolv.conf's, tried in turn over the query's transport; SERVFAIL when none answers), " +
			"whoami (the client's address and port in the additional section), log and errors (to stderr); any other plugin is refused at start"},
	{Name: "echo-basic", Entrypoint: []string{"image", "echo-basic"}, Run: runEchoBasic,
		Aliases: []string{"registry.k8s.io/gateway-api/echo-basic"},
		Doc: "the Gateway API conformance suite's backend (echo-basic), configured by its environment as the suite's manifests do: " +
			"an HTTP echo in JSON (request, pod, TLS) on 3000 (HTTP/1.1, /ws WebSocket echo, /retry/, /status/NNN, ?delay=), 3001 (h2c) and 8443 (HTTPS with TLS_SERVER_CERT/PRIVKEY, TLS_CLIENT_CACERTS); " +
			"GRPC_ECHO_SERVER: the GrpcEcho gRPC service on 3000 (and 8443 with TLS); " +
			"TCP_ECHO_SERVER: the PING/IS_TLS/TEST line echo on 3000 and TLS on 8443; " +
			"UDP_ECHO_SERVER: a JSON echo of each datagram on 8080"},
	{Name: "nginx", Entrypoint: []string{"image", "nginx"}, Run: runNginx, Programs: []string{"/usr/sbin/nginx"},
		Aliases: []string{"library/nginx", "registry.k8s.io/e2e-test-images/nginx", "k8s.gcr.io/e2e-test-images/nginx", "nginxinc/nginx-unprivileged"},
		Doc:     "a stand-in for nginx as a placeholder web server: HTTP on port 80, nginx's welcome page at /; reads no nginx configuration"},
	{Name: "dnsutils", Argv: machineArgv,
		Aliases: []string{"registry.k8s.io/e2e-test-images/jessie-dnsutils", "registry.k8s.io/e2e-test-images/glibc-dns-testing", "k8s.gcr.io/e2e-test-images/jessie-dnsutils"},
		Doc:     "the machine's DNS tools (dig, getent, nslookup, sh): the command runs as given, sh by default"},
	{Name: "busybox", Argv: busyboxArgv,
		Aliases: []string{"library/busybox", "registry.k8s.io/e2e-test-images/busybox", "gcr.io/google-containers/busybox", "registry.k8s.io/busybox"},
		Doc:     "the machine's busybox (Debian's busybox-static): the command is an applet (sh -c …, wget, nslookup …), sh by default; the filesystem is the machine's, read-only"},
}

// Names of the images a user may pick, for error messages.
func Names() []string {
	var out []string
	for _, i := range Builtin {
		out = append(out, i.Name)
	}
	return append(out, Host)
}

// Lookup finds a built-in image by reference ("svcnet/echo",
// "svcnet/echo:1.0", "docker.io/svcnet/echo:latest").
func Lookup(ref string) (Image, bool) {
	name := ref
	if i := strings.LastIndex(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	name = strings.TrimPrefix(name, "docker.io/")
	if name == Host {
		return Image{Name: Host}, true
	}
	i := slices.IndexFunc(Builtin, func(img Image) bool { return img.Name == name || slices.Contains(img.Aliases, name) })
	if i < 0 {
		return Image{}, false
	}
	return Builtin[i], true
}

// ByProgram finds the image whose program is named name (the base name
// svcnet was started as: "agnhost"); svcnet's own program is svcnet.
func ByProgram(name string) (Image, bool) {
	for _, img := range Builtin {
		if img.Run == nil {
			continue
		}
		for _, p := range img.Programs {
			if path.Base(p) == name {
				return img, true
			}
		}
	}
	return Image{}, false
}

// ErrNotBuiltin explains an unknown image.
func ErrNotBuiltin(ref string) error {
	return fmt.Errorf("image %q is not built into svcnet (built-in images: %s)", ref, strings.Join(Names(), ", "))
}

// Short returns the name of `svcnet image <short>` for an image run by
// this package.
func Short(img Image) string {
	if len(img.Entrypoint) == 2 && img.Entrypoint[0] == "image" {
		return img.Entrypoint[1]
	}
	return ""
}
