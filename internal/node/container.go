package node

import (
	"context"
	"time"

	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// container is one container of a pod worker: its state machine
// (podstate) and what runs it.
type container struct {
	*podstate.Container
	proc      *runtime.Process
	stopProbe context.CancelFunc
	logPath   string
	env       []string // of the current start, for exec
}

// exited records the end of the current process and lets it go.
func (c *container) exited(code int, started time.Time) {
	c.Exited(code, started, time.Now())
	if c.stopProbe != nil {
		c.stopProbe()
	}
	c.proc = nil
}
