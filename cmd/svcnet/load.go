package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/dockerd"
	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/imagestore"
)

func newLoadCommand() *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "load [--tag REPO:TAG] IMAGE-ARCHIVE|IMAGE...",
		Short: "Put images from archives or the local Docker daemon into every node of every local cluster (needs root)",
		Long: `Import the images of each archive into this machine's image store
(` + "`$SVCNET_HOME/images`" + `, root's ~/.svcnet/images), which every node agent of every
local cluster runs its pods' images from: a loaded image is on every node at
once, of the clusters running and of those made later, and it was never pushed
anywhere (like kind load image-archive, for all clusters). "-" reads an archive
from stdin.

An archive is what docker save writes (manifest.json with each image's config,
tags and layers; Docker 25 and later write an OCI layout inside), an OCI image
layout in a tar (oci-layout, index.json, blobs/; of a multi-arch index, the
image for this machine's platform), or either compressed whole with gzip or
zstd. Each image is recorded under every tag it carries (RepoTags;
io.containerd.image.name, or org.opencontainers.image.ref.name when it is more
than a tag) and under --tag, for an archive of one image: an image that
carries no tag needs one. Its digest and ID are its config's (the image ID of
docker images). Every config, manifest and layer is checked against its digest
first; an archive that fails leaves nothing in the store.

An argument that is no file is an image of the local Docker daemon (at
DOCKER_HOST, else unix:///var/run/docker.sock), which svcnet load asks for
its docker save archive (like kind load docker-image); a daemon that wants
TLS is not asked: save the image to an archive instead.

Pods use a loaded image when the pull policy lets them: imagePullPolicy
IfNotPresent or Never. A :latest tag, or none, defaults the policy to Always,
as in Kubernetes and kind: the node agent then asks the image's registry first,
so give such pods imagePullPolicy: IfNotPresent, or load the image under
another tag. A name that is a built-in image's (nginx, busybox …) runs the
built-in image, not the loaded one.`,
		Example: `  docker build -t web:1 . && sudo svcnet load web:1
  docker save -o web.tar web:1 && sudo svcnet load web.tar
  docker save web:1 api:2 | sudo svcnet load -
  sudo svcnet load --tag registry.example/team/app:dev app-oci.tar`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return loadArchives(cmd.Context(), args, ref, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&ref, "tag", "", "a tag (REPO:TAG) for the archive's image, besides its own: needed for an image that carries none; the archive must hold one image")
	return cmd
}

// loadArchives loads each archive into the machine's image store and
// prints each image: its tags, digest and size.
func loadArchives(ctx context.Context, args []string, ref string, stdin io.Reader, out, errOut io.Writer) error {
	if ref != "" && len(args) > 1 {
		return fmt.Errorf("--tag names the image of one archive; %d were given", len(args))
	}
	// Every file first, so that a missing one loads nothing; the names
	// that are no files are the Docker daemon's images, asked for in one
	// archive.
	var inputs []io.Reader
	var whats, daemonImages []string
	stdinUsed := false
	for _, a := range args {
		if a == "-" {
			if stdinUsed {
				return fmt.Errorf(`"-" (stdin) given twice`)
			}
			stdinUsed = true
			inputs, whats = append(inputs, stdin), append(whats, "stdin")
			continue
		}
		f, err := os.Open(a)
		if errors.Is(err, fs.ErrNotExist) {
			if _, perr := name.ParseReference(a); perr != nil {
				return fmt.Errorf("%s: no such file, nor an image name (%v)", a, perr)
			}
			daemonImages = append(daemonImages, a)
			continue
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory: give an archive of it (an OCI layout: tar -C %s -cf image.tar .)", a, a)
		}
		inputs, whats = append(inputs, f), append(whats, a)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("svcnet load needs root (sudo): the clusters' image store is root's, and layers keep their files' owners only when unpacked as root")
	}
	if len(daemonImages) > 0 {
		saved, err := fromDaemon(ctx, daemonImages)
		if err != nil {
			return err
		}
		defer saved.Close()
		inputs, whats = append(inputs, saved), append(whats, "the Docker daemon's "+strings.Join(daemonImages, ", "))
	}
	store, err := imagestore.Open(cluster.ImageStoreDir())
	if err != nil {
		return err
	}
	for i, in := range inputs {
		what := whats[i]
		res, err := store.Load(ctx, in, imagestore.LoadOptions{Name: ref})
		if err != nil {
			return fmt.Errorf("loading %s: %w", what, err)
		}
		for _, li := range res.Images {
			var tags []string
			for _, t := range li.Tags {
				tags = append(tags, familiar(t))
			}
			slices.Sort(tags) // an archive's own order is its writer's

			fmt.Fprintf(out, "%s %s %s\n", strings.Join(tags, ","), li.Image.Digest, humanSize(li.Image.Size))
			for _, t := range tags {
				if strings.HasSuffix(t, ":latest") {
					fmt.Fprintf(errOut, "note: pods of %s default to imagePullPolicy Always and would ask its registry first: give them imagePullPolicy IfNotPresent or Never\n", t)
				}
				if _, builtin := images.Lookup(t); builtin {
					fmt.Fprintf(errOut, "note: %s is a built-in image's name: pods of it run the built-in image, not this one\n", t)
				}
			}
		}
		fmt.Fprintf(errOut, "%s: %d image(s), %d new layer(s)\n", what, len(res.Images), res.LayersAdded)
	}
	return nil
}

// fromDaemon is the local Docker daemon's docker save archive of images,
// once it has said it has each of them.
func fromDaemon(ctx context.Context, images []string) (io.ReadCloser, error) {
	host := dockerd.Host()
	c, err := dockerd.New(host)
	if err != nil {
		return nil, err
	}
	for _, img := range images {
		has, err := c.Has(ctx, img)
		if errors.Is(err, dockerd.ErrNoDaemon) {
			return nil, fmt.Errorf("%s: no such file, and %v, to ask for the image: make an archive with `docker save -o image.tar %s` and load that (or `docker save %s | sudo svcnet load -`)", img, err, img, img)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", img, err)
		}
		if !has {
			return nil, fmt.Errorf("%s: no such file, nor an image of the Docker daemon at %s", img, host)
		}
	}
	return c.Save(ctx, images)
}

// familiar is a reference as Docker shows it: index.docker.io/library/web:1
// is web:1.
func familiar(ref string) string {
	if r, ok := strings.CutPrefix(ref, "index.docker.io/library/"); ok {
		return r
	}
	if r, ok := strings.CutPrefix(ref, "index.docker.io/"); ok {
		return r
	}
	return ref
}

// humanSize is a size as docker images shows it, in powers of 1000.
func humanSize(n int64) string {
	units := []string{"B", "kB", "MB", "GB", "TB"}
	f, u := float64(n), 0
	for f >= 1000 && u < len(units)-1 {
		f, u = f/1000, u+1
	}
	if u == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.3g%s", f, units[u])
}
