//go:build tools

// Package deps pins modules that packages in progress will use.
package deps

import (
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
)
