// Command svcnet is Kubernetes service discovery and load balancing in one
// binary: an API server, controllers, cluster DNS, the node service proxy,
// an ingress proxy, and a local cluster in network namespaces.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svcnet:", err)
		os.Exit(1)
	}
}
