package images

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runAgnhost stands in for the e2e image
// registry.k8s.io/e2e-test-images/agnhost (2.66.1), whose entrypoint is
// /agnhost: args[0] names a subcommand and the rest are its flags, as
// Kubernetes' end-to-end tests pass them. The subcommands answer what
// the tests ask of them in agnhost's words, to the byte where a test
// compares strings. Without arguments it pauses, as the image's default
// command does.
//
// args may start with the program's path as the pod invoked it
// ("/agnhost", "/agnhost-2"); entrypoint-tester prints it.
func runAgnhost(ctx context.Context, args []string) error {
	env := &agnhostEnv{
		argv0:       "/agnhost",
		stdout:      os.Stdout,
		stderr:      os.Stderr,
		shell:       "/bin/sh",
		resolvConf:  "/etc/resolv.conf",
		etcHosts:    "/etc/hosts",
		uploadDir:   "/uploads",
		webRoot:     "/",
		linger:      60 * time.Second,
		dialTimeout: 5 * time.Second,
	}
	err := env.run(ctx, args)
	var code agnhostExit
	if errors.As(err, &code) {
		if code == 0 {
			return nil
		}
		os.Exit(int(code))
	}
	return err
}

// agnhostCommands are the subcommands, by name.
var agnhostCommands = map[string]func(ctx context.Context, env *agnhostEnv, args []string) error{
	"connect":           agnhostConnect,
	"dns-server-list":   agnhostDNSServerList,
	"dns-suffix":        agnhostDNSSuffix,
	"entrypoint-tester": agnhostEntrypointTester,
	"etc-hosts":         agnhostEtcHosts,
	"liveness":          agnhostLiveness,
	"netexec":           agnhostNetexec,
	"pause":             agnhostPause,
	"porter":            agnhostPorter,
	"serve-hostname":    agnhostServeHostname,
	"test-webserver":    agnhostTestWebserver,
}

// agnhostSubcommands names the subcommands, sorted.
var agnhostSubcommands = slices.Sorted(maps.Keys(agnhostCommands))

// agnhostEnv is what a subcommand runs with: where it writes, which
// files it reads and how its servers listen. runAgnhost binds it to the
// machine (the pod's view of it); tests bind it to loopback and
// temporary files.
type agnhostEnv struct {
	argv0          string
	stdout, stderr io.Writer
	shell          string // netexec /shell
	resolvConf     string // dns-suffix, dns-server-list
	etcHosts       string // etc-hosts
	uploadDir      string // netexec /upload
	webRoot        string // test-webserver
	// linger is how long serve-hostname keeps serving after SIGTERM
	// before it exits (agnhost waits for the pod's deletion).
	linger time.Duration
	// dialTimeout bounds each of netexec /dial's tries (agnhost: 5 s).
	dialTimeout time.Duration
	// forwardTimeout bounds each of /coredns forward's tries (0:
	// corednsForwardTry).
	forwardTimeout time.Duration
	// bindHost, when set, replaces the address servers listen on
	// (agnhost's are all wildcards).
	bindHost string
	// listening, when set, learns each server's address once it listens
	// (tests use it to find ports the system picked).
	listening func(name string, addr net.Addr)
}

// agnhostExit is the end of a subcommand that exits the process with a
// status of its own, having said what it had to.
type agnhostExit int

func (e agnhostExit) Error() string { return "exit status " + strconv.Itoa(int(e)) }

func (env *agnhostEnv) run(ctx context.Context, args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "/") {
		env.argv0, args = args[0], args[1:]
	}
	if path.Base(env.argv0) == "coredns" {
		return corednsProgram(ctx, env, args)
	}
	if len(args) == 0 {
		args = []string{"pause"}
	}
	cmd, ok := agnhostCommands[args[0]]
	if !ok {
		return fmt.Errorf("agnhost: unknown subcommand %q (supported: %s)", args[0], strings.Join(agnhostSubcommands, ", "))
	}
	return cmd(ctx, env, args[1:])
}

// closers are the listeners and servers a subcommand has open.
type closers []io.Closer

// closeAll closes them, as the subcommand that opened them returns.
func (cs *closers) closeAll() {
	for _, c := range *cs {
		c.Close()
	}
}

func (env *agnhostEnv) logger() *log.Logger {
	return log.New(env.stderr, "", log.LstdFlags)
}

// addr is where a server listens: host (agnhost's choice) unless the
// environment says otherwise.
func (env *agnhostEnv) addr(host, port string) string {
	if env.bindHost != "" {
		host = env.bindHost
	}
	return net.JoinHostPort(host, port)
}

func (env *agnhostEnv) announce(name string, a net.Addr) {
	if env.listening != nil {
		env.listening(name, a)
	}
}

// agnhostFlagSet is a subcommand's flag set; it also takes the logging
// flags every agnhost command accepts (-v, --vmodule …) and ignores them.
func agnhostFlagSet(env *agnhostEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.String("v", "", "log level (ignored)")
	fs.String("vmodule", "", "per-file log levels (ignored)")
	fs.Duration("log-flush-frequency", 5*time.Second, "log flush interval (ignored)")
	return fs
}

// parseAgnhostFlags parses args the way agnhost's command line library
// does: flags may come before, between or after the positional
// arguments, "_" in a flag's name is "-", and "--" ends the flags. It
// returns the positional arguments, at most maxArgs of them (-1: any).
func parseAgnhostFlags(fs *flag.FlagSet, args []string, maxArgs int) ([]string, error) {
	args = slices.Clone(args)
	for i, a := range args {
		if a == "--" {
			break
		}
		if name, ok := strings.CutPrefix(a, "-"); ok && name != "" {
			name, value, hasValue := strings.Cut(name, "=")
			args[i] = "-" + strings.ReplaceAll(name, "_", "-")
			if hasValue {
				args[i] += "=" + value
			}
		}
	}
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			return nil, agnhostExit(0)
		}
		if err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	if maxArgs >= 0 && len(positional) > maxArgs {
		return nil, fmt.Errorf("%s: accepts at most %d arg(s), received %d", fs.Name(), maxArgs, len(positional))
	}
	return positional, nil
}
