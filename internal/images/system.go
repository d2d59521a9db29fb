package images

import (
	"context"
	"fmt"
	"os/exec"
	"path"
)

// runPause sleeps until the pod stops, as the pause container does.
func runPause(ctx context.Context, _ []string) error {
	<-ctx.Done()
	return nil
}

// busyboxArgv runs a busybox image's command with the machine's busybox
// (Debian's busybox-static): the command names an applet, as in the
// image, where /bin/sh and every other applet are links to busybox.
// Without a command the image runs sh, as its default CMD.
func busyboxArgv(command, args []string) ([]string, error) {
	bin, err := exec.LookPath("busybox")
	if err != nil {
		return nil, fmt.Errorf("the busybox image runs the machine's busybox, and there is none (Debian: apt-get install busybox-static)")
	}
	argv := append(append([]string{}, command...), args...)
	if len(argv) == 0 {
		argv = []string{"sh"}
	}
	// /bin/sh, /bin/echo … are the applets sh, echo.
	argv[0] = path.Base(argv[0])
	return append([]string{bin}, argv...), nil
}

// machineArgv runs the container's command as given, with the machine's
// programs (sh when there is none): images that stand for a set of
// common tools.
func machineArgv(command, args []string) ([]string, error) {
	argv := append(append([]string{}, command...), args...)
	if len(argv) == 0 {
		argv = []string{"sh"}
	}
	return argv, nil
}
