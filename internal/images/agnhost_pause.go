package images

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// agnhostPause is agnhost's pause: it says so, waits for SIGTERM, says
// why it exits, and exits 2 (SIGTERM's status in agnhost). The message
// also goes to $TERMINATION_MESSAGE_PATH when the pod sets it; svcnet's
// nodes keep no /dev/termination-log, agnhost's default.
func agnhostPause(ctx context.Context, env *agnhostEnv, args []string) error {
	if _, err := parseAgnhostFlags(agnhostFlagSet(env, "pause"), args, 0); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "Paused")
	fmt.Fprintln(env.stdout, "Signals registered")
	<-ctx.Done()
	msg := fmt.Sprintf("exiting because of signal %q\n", "terminated")
	if path := os.Getenv("TERMINATION_MESSAGE_PATH"); path != "" {
		_ = os.WriteFile(path, []byte(msg), 0o644)
	}
	fmt.Fprint(env.stdout, msg)
	return agnhostExit(2)
}

// agnhostEntrypointTester is agnhost's entrypoint-tester: it prints its
// command line as Go prints a slice ("[/agnhost entrypoint-tester a b]")
// and exits.
func agnhostEntrypointTester(_ context.Context, env *agnhostEnv, args []string) error {
	fmt.Fprintf(env.stdout, "[%s]\n", strings.Join(append([]string{env.argv0, "entrypoint-tester"}, args...), " "))
	return nil
}
