package pods

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/imagestore"
)

// ImageSource gives the images of the node's image store: pulled (or
// imported) earlier, without the network. Pulling is not the pods'.
type ImageSource interface {
	Get(ref string) (*imagestore.Image, error)
}

// errNoCommand: neither the image nor the container says what to run.
var errNoCommand = errors.New("no command specified: the image has neither entrypoint nor cmd, and the container neither command nor args")

// imageArgv is the command line of a container of an image from the
// store, by Kubernetes' rules; command and args are the container's,
// their $(VAR) references expanded (the image's are never expanded):
// command replaces the entrypoint, and with it the cmd even when args
// is empty; args alone replace the cmd.
func imageArgv(cfg imagestore.Config, command, args []string) ([]string, error) {
	var argv []string
	switch {
	case len(command) > 0:
		argv = slices.Concat(command, args)
	case len(args) > 0:
		argv = slices.Concat(cfg.Entrypoint, args)
	default:
		argv = slices.Concat(cfg.Entrypoint, cfg.Cmd)
	}
	if len(argv) == 0 {
		return nil, errNoCommand
	}
	return argv, nil
}

// imageWorkingDir is where the container starts: its workingDir, else
// the image's, else /.
func imageWorkingDir(cfg imagestore.Config, c *corev1.Container) string {
	switch {
	case c.WorkingDir != "":
		return c.WorkingDir
	case cfg.WorkingDir != "":
		return cfg.WorkingDir
	default:
		return "/"
	}
}

// imageBaseEnv is what a container of an image starts with, before the
// pod's variables override it by name: the image's environment, with the
// default PATH if it sets none (as containerd adds it) and HOME if it
// sets none (home is the user's in the image's passwd, as runc sets it).
func imageBaseEnv(cfg imagestore.Config, home string) []corev1.EnvVar {
	var env []corev1.EnvVar
	set := func(name, value string) {
		if i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name }); i >= 0 {
			env[i].Value = value
			return
		}
		env = append(env, corev1.EnvVar{Name: name, Value: value})
	}
	set("PATH", defaultPath)
	for _, kv := range cfg.Env {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			set(name, value)
		}
	}
	if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "HOME" }) {
		set("HOME", home)
	}
	return env
}
