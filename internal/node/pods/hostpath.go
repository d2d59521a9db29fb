package pods

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// prepareHostPaths makes the hostPath volumes that ask to be made
// (DirectoryOrCreate, FileOrCreate) and checks the type of those that
// name one, as kubelet does before a pod's containers start: a missing
// or mistyped path fails the start, with the volume named.
func prepareHostPaths(pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil || v.HostPath.Type == nil {
			continue
		}
		// Never made relative to the agent's own directory.
		if !filepath.IsAbs(v.HostPath.Path) {
			return fmt.Errorf("volume %q: hostPath %q is not absolute", v.Name, v.HostPath.Path)
		}
		if err := prepareHostPath(v.HostPath.Path, *v.HostPath.Type); err != nil {
			return fmt.Errorf("volume %q: hostPath %s: %w", v.Name, v.HostPath.Path, err)
		}
	}
	return nil
}

func prepareHostPath(path string, typ corev1.HostPathType) error {
	fi, err := os.Stat(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return err
	}
	switch typ {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if missing {
			return os.MkdirAll(path, 0o755)
		}
		return want(fi, fs.ModeDir, "a directory")
	case corev1.HostPathFileOrCreate:
		if missing {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		return want(fi, 0, "a file")
	}
	if missing {
		return fmt.Errorf("does not exist (type %s)", typ)
	}
	switch typ {
	case corev1.HostPathDirectory:
		return want(fi, fs.ModeDir, "a directory")
	case corev1.HostPathFile:
		return want(fi, 0, "a file")
	case corev1.HostPathSocket:
		return want(fi, fs.ModeSocket, "a socket")
	case corev1.HostPathCharDev:
		return want(fi, fs.ModeDevice|fs.ModeCharDevice, "a character device")
	case corev1.HostPathBlockDev:
		return want(fi, fs.ModeDevice, "a block device")
	}
	return fmt.Errorf("unknown hostPath type %q", typ)
}

// want checks fi's type bits are exactly kind (0: a regular file).
func want(fi fs.FileInfo, kind fs.FileMode, what string) error {
	if fi.Mode().Type() != kind {
		return fmt.Errorf("is not %s", what)
	}
	return nil
}
