package cluster

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// invoker is the user who ran svcnet through sudo (nil otherwise): the
// cluster needs root, its user does not.
type invoker struct {
	home     string
	uid, gid int
}

func sudoInvoker() *invoker {
	if os.Geteuid() != 0 || os.Getenv("SUDO_USER") == "" || os.Getenv("SUDO_USER") == "root" {
		return nil
	}
	u, err := user.Lookup(os.Getenv("SUDO_USER"))
	if err != nil {
		return nil
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil || u.HomeDir == "" {
		return nil
	}
	return &invoker{home: u.HomeDir, uid: uid, gid: gid}
}

// UserKubeconfigCopy is where `sudo svcnet up` puts a copy of the admin
// kubeconfig for the user who ran it (the cluster's own state stays
// root's): ~/.kube/svcnet-<name>.kubeconfig.
func UserKubeconfigCopy(home, name string) string {
	return filepath.Join(home, ".kube", "svcnet-"+name+".kubeconfig")
}

// copyKubeconfigForInvoker gives the sudo user the admin kubeconfig, owned
// by them and readable by them only; it returns its path ("" when not
// under sudo).
func copyKubeconfigForInvoker(st State, name string, inv *invoker) (string, error) {
	if inv == nil {
		return "", nil
	}
	data, err := os.ReadFile(st.Kubeconfig())
	if err != nil {
		return "", err
	}
	dir := filepath.Join(inv.home, ".kube")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", err
		}
		if err := os.Chown(dir, inv.uid, inv.gid); err != nil {
			return "", err
		}
	}
	path := UserKubeconfigCopy(inv.home, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", err
	}
	if err := os.Chown(tmp, inv.uid, inv.gid); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("kubeconfig for uid %d: %w", inv.uid, err)
	}
	return path, nil
}

// removeInvokerKubeconfig undoes copyKubeconfigForInvoker.
func removeInvokerKubeconfig(name string) {
	if inv := sudoInvoker(); inv != nil {
		_ = os.Remove(UserKubeconfigCopy(inv.home, name))
	}
}
