package images

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// agnhostDNSSuffix is agnhost's dns-suffix: the search domains of the
// pod's resolv.conf, comma-separated, on one line.
func agnhostDNSSuffix(_ context.Context, env *agnhostEnv, args []string) error {
	return printResolvConfList(env, args, "dns-suffix", "search")
}

// agnhostDNSServerList is agnhost's dns-server-list: the first
// nameserver line's addresses of the pod's resolv.conf, comma-separated,
// on one line.
func agnhostDNSServerList(_ context.Context, env *agnhostEnv, args []string) error {
	return printResolvConfList(env, args, "dns-server-list", "nameserver")
}

// printResolvConfList prints the words after keyword on the first line
// of resolv.conf that starts with it. As agnhost, it splits at single
// spaces and takes only that one line.
func printResolvConfList(env *agnhostEnv, args []string, name, keyword string) error {
	if _, err := parseAgnhostFlags(agnhostFlagSet(env, name), args, 0); err != nil {
		return err
	}
	data, err := os.ReadFile(env.resolvConf)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, keyword) {
			fmt.Fprintln(env.stdout, strings.Join(strings.Split(line, " ")[1:], ","))
			return nil
		}
	}
	return fmt.Errorf("%s: no %q line in %s", name, keyword, env.resolvConf)
}

// agnhostEtcHosts is agnhost's etc-hosts: the pod's /etc/hosts and a
// newline.
func agnhostEtcHosts(_ context.Context, env *agnhostEnv, args []string) error {
	if _, err := parseAgnhostFlags(agnhostFlagSet(env, "etc-hosts"), args, 0); err != nil {
		return err
	}
	data, err := os.ReadFile(env.etcHosts)
	if err != nil {
		return fmt.Errorf("etc-hosts: %w", err)
	}
	fmt.Fprintln(env.stdout, string(data))
	return nil
}
