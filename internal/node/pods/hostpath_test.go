package pods

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPrepareHostPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		typ     corev1.HostPathType
		wantErr string
		made    os.FileMode // type of what is there afterwards, when made
	}{
		{"unset, missing", filepath.Join(dir, "nothing"), corev1.HostPathUnset, "", 0},
		{"file or create, missing", filepath.Join(dir, "xtables.lock"), corev1.HostPathFileOrCreate, "", 0},
		{"file or create, a file", file, corev1.HostPathFileOrCreate, "", 0},
		{"file or create, a directory", dir, corev1.HostPathFileOrCreate, "is not a file", 0},
		{"directory or create, missing", filepath.Join(dir, "a", "b"), corev1.HostPathDirectoryOrCreate, "", os.ModeDir},
		{"directory or create, a file", file, corev1.HostPathDirectoryOrCreate, "is not a directory", 0},
		{"directory, missing", filepath.Join(dir, "none"), corev1.HostPathDirectory, "does not exist", 0},
		{"directory", dir, corev1.HostPathDirectory, "", 0},
		{"file, a directory", dir, corev1.HostPathFile, "is not a file", 0},
		{"socket, a file", file, corev1.HostPathSocket, "is not a socket", 0},
		{"char device", "/dev/null", corev1.HostPathCharDev, "", 0},
		{"block device, a char device", "/dev/null", corev1.HostPathBlockDev, "is not a block device", 0},
		{"unknown type", file, "Fifo", "unknown hostPath type", 0},
		{"relative, to be made", "relative/dir", corev1.HostPathDirectoryOrCreate, "is not absolute", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: tt.path, Type: ptr.To(tt.typ)}}}}}}
			err := prepareHostPaths(pod)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), `volume "v"`) {
				t.Errorf("error %v does not name the volume", err)
			}
			if strings.HasSuffix(string(tt.typ), "OrCreate") && tt.wantErr == "" {
				fi, err := os.Stat(tt.path)
				if err != nil || fi.Mode().Type() != tt.made {
					t.Errorf("after: %v, %v, want type %v", fi, err, tt.made)
				}
			}
		})
	}
}
