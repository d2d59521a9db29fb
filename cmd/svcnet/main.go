// Command svcnet is Kubernetes service discovery and load balancing in one
// binary: an API server, controllers, cluster DNS, the node service proxy,
// an ingress proxy, and a local cluster in network namespaces.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/svcnet/svcnet/internal/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Started as an image's program (/agnhost in an agnhost container):
	// be that program.
	if img, ok := images.ByProgram(filepath.Base(os.Args[0])); ok {
		// The program's path first, as the image's own program sees it.
		if err := img.Run(ctx, append([]string{"/" + filepath.Base(os.Args[0])}, os.Args[1:]...)); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
			stop()
			os.Exit(1)
		}
		return
	}
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svcnet:", err)
		os.Exit(1)
	}
}
