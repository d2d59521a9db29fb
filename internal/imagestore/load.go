package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// The annotations that name an image of an OCI layout's index.json:
// containerd's (and Docker's, and buildx's) full reference, and the
// OCI's, which is often a tag alone ("1").
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// LoadOptions are a load's choices.
type LoadOptions struct {
	// Name, a tag (web:1; web is web:latest), is recorded for the
	// archive's image besides the tags the image carries. The archive
	// must hold one image; one that carries no tag needs it.
	Name string
	// Platform to choose from a multi-arch index; nil is this machine's.
	Platform *v1.Platform
}

// LoadResult is what a load recorded.
type LoadResult struct {
	// Images are the archive's images in its order.
	Images []LoadedImage
	// LayersAdded counts the layers this load unpacked into the store;
	// the images' other layers were there already (pulled or loaded
	// earlier) or are shared with another image of the archive.
	LayersAdded int
}

// LoadedImage is one image of an archive as recorded.
type LoadedImage struct {
	// Image is the record under its first tag.
	Image *Image
	// Tags are the names recorded, fully qualified
	// (index.docker.io/library/web:1), each also at its repository's
	// config digest (Image.ID) and, from an OCI layout, at the digests
	// of its manifest and of the index it was chosen from.
	Tags []string
}

// archImage is one image of an archive, found and checked but for its
// layers, which are read only when unpacked.
type archImage struct {
	what           string   // where it is in the archive, for messages
	tags           []string // the names it carries, as the archive has them
	tagOnly        []string // ref.name annotations that are a tag alone
	configDigest   v1.Hash
	configSize     int64
	config         *v1.ConfigFile
	manifestDigest v1.Hash // zero for a `docker save` image without an OCI manifest
	indexDigest    v1.Hash // the outermost index it was chosen from, if any
	layers         []archLayer
}

type archLayer struct {
	file      string  // its name in the archive
	blob      v1.Hash // the blob's digest; zero where the archive does not say
	mediaType types.MediaType
	size      int64
	diffID    v1.Hash
}

// Load imports the images of an archive into the store, so that Get
// finds them under their tags: a `docker save` tarball (manifest.json
// naming each image's config, tags and layers — plain or compressed
// tars, `<id>/layer.tar` or `blobs/sha256/…`) or an OCI image layout
// tarball (oci-layout, index.json, blobs/; the images of Docker 25 and
// later's `docker save` are read this way), whose index may hold a
// multi-arch index: the machine's platform is chosen as Pull chooses
// it. r is read in place when it is a regular file holding a plain tar,
// copied into tmp/ first otherwise (a pipe; an archive compressed whole
// with gzip or zstd).
//
// The whole archive is checked before anything is published: every
// config and manifest against its digest, each layer's tar against its
// config's diffID (and a blob named by its digest against it), so a
// tampered layer fails the load with an error naming it (ErrVerify). An
// archive that is not a tar, is truncated, lacks a file it names or a
// name for an image is ErrArchive; an image for another platform
// ErrPlatform. On any error nothing of the archive is left in the store:
// layers are unpacked into tmp/ and renamed into place only once all of
// them have verified, images recorded after.
//
// Layers are shared by diffID with pulled and imported images: one the
// store has is not unpacked again. An image's ID and digest are its
// config's digest (the image ID `docker images` shows), since a `docker
// save` image has no registry manifest.
func (s *Store) Load(ctx context.Context, r io.Reader, opts LoadOptions) (*LoadResult, error) {
	want := nodePlatform()
	if opts.Platform != nil {
		want = *opts.Platform
	}
	var extra *name.Tag
	if opts.Name != "" {
		ref, err := parseRef(opts.Name)
		if err != nil {
			return nil, fmt.Errorf("name %q: %w", opts.Name, err)
		}
		tag, ok := ref.(name.Tag)
		if !ok {
			return nil, fmt.Errorf("%w: name %q: give a tag (web:1), not a digest", ErrInvalidReference, opts.Name)
		}
		extra = &tag
	}

	ra, size, cleanup, err := s.archiveReader(ctx, r)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	a, err := indexArchive(ra, size)
	if err != nil {
		return nil, err
	}
	imgs, err := a.images(want)
	if err != nil {
		return nil, err
	}
	tags, err := tagImages(imgs, extra)
	if err != nil {
		return nil, err
	}
	layers, added, err := s.loadLayers(ctx, a, imgs)
	if err != nil {
		return nil, err
	}
	res := &LoadResult{LayersAdded: added}
	for i, img := range imgs {
		li, err := s.recordLoaded(img, tags[i], layers)
		if err != nil {
			return nil, err
		}
		res.Images = append(res.Images, li)
	}
	return res, nil
}

// images finds the archive's images: by its OCI layout when it has one
// (as containerd does; Docker 25's `docker save` writes both), else by
// its manifest.json.
func (a *imageArchive) images(want v1.Platform) ([]*archImage, error) {
	switch {
	case a.has("oci-layout") || a.has("index.json"):
		imgs, err := a.ociImages(want)
		if err != nil {
			return nil, err
		}
		if a.has("manifest.json") {
			a.addRepoTags(imgs)
		}
		return imgs, nil
	case a.has("manifest.json"):
		return a.dockerImages(want)
	default:
		return nil, fmt.Errorf("%w: neither manifest.json (docker save) nor index.json (OCI image layout) is in the archive", ErrArchive)
	}
}

// dockerManifest is manifest.json of `docker save`.
type dockerManifest []struct {
	Config       string
	RepoTags     []string
	Layers       []string
	LayerSources map[string]json.RawMessage `json:",omitempty"`
}

func (a *imageArchive) readDockerManifest() (dockerManifest, error) {
	b, err := a.readFile("manifest.json")
	if err != nil {
		return nil, err
	}
	var m dockerManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %v", ErrArchive, err)
	}
	return m, nil
}

func (a *imageArchive) dockerImages(want v1.Platform) ([]*archImage, error) {
	m, err := a.readDockerManifest()
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: manifest.json lists no image", ErrArchive)
	}
	var imgs []*archImage
	for i, e := range m {
		img := &archImage{what: fmt.Sprintf("manifest.json image %d", i), tags: e.RepoTags}
		if len(e.RepoTags) > 0 {
			img.what += " (" + strings.Join(e.RepoTags, ", ") + ")"
		}
		if e.Config == "" {
			return nil, fmt.Errorf("%w: %s names no config", ErrArchive, img.what)
		}
		b, err := a.readFile(e.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: config: %w", img.what, err)
		}
		img.configDigest, img.configSize = sha256Of(b), int64(len(b))
		if named, ok := digestInName(e.Config, true); ok && named != img.configDigest {
			return nil, &mismatchError{what: img.what + " config " + e.Config, want: named.String(), got: img.configDigest.String()}
		}
		if err := img.parseConfig(b, len(e.Layers), want); err != nil {
			return nil, err
		}
		for j, l := range e.Layers {
			diffID := img.config.RootFS.DiffIDs[j]
			f, ok := a.stat(l)
			if !ok {
				if _, foreign := e.LayerSources[diffID.String()]; foreign {
					return nil, fmt.Errorf("%w: %s: layer %d (diffID %s) is a foreign layer, not in the archive: svcnet load fetches nothing", ErrArchive, img.what, j, diffID)
				}
				return nil, fmt.Errorf("%w: %s: layer %d: %s is not in the archive", ErrArchive, img.what, j, l)
			}
			blob, _ := digestInName(l, false)
			img.layers = append(img.layers, archLayer{file: l, blob: blob, size: f.size, diffID: diffID})
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// addRepoTags adds to the images of an OCI layout the RepoTags that
// manifest.json gives the same config (Docker 25's archives have both).
func (a *imageArchive) addRepoTags(imgs []*archImage) {
	m, err := a.readDockerManifest()
	if err != nil {
		return // the OCI layout is what counts
	}
	for _, e := range m {
		d, ok := digestInName(e.Config, true)
		if !ok {
			continue
		}
		for _, img := range imgs {
			if img.configDigest == d {
				img.tags = append(img.tags, e.RepoTags...)
			}
		}
	}
}

func (a *imageArchive) ociImages(want v1.Platform) ([]*archImage, error) {
	if a.has("oci-layout") {
		b, err := a.readFile("oci-layout")
		if err != nil {
			return nil, err
		}
		var l struct {
			Version string `json:"imageLayoutVersion"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%w: oci-layout: %v", ErrArchive, err)
		}
		if l.Version != "1.0.0" {
			return nil, fmt.Errorf("%w: oci-layout: image layout version %q, not 1.0.0", ErrArchive, l.Version)
		}
	}
	b, err := a.readFile("index.json")
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: index.json: %v", ErrArchive, err)
	}
	var imgs []*archImage
	var offered []string // the platforms of images left out
	byManifest := map[v1.Hash]*archImage{}
	for i, d := range idx.Manifests {
		// index.json may itself be a multi-arch index: its images for
		// other platforms (and attestations, "unknown/unknown") are left
		// out, as an index's are.
		if p := d.Platform; p != nil && d.MediaType.IsImage() && !platformMatches(*p, want) {
			if p.OS != "unknown" {
				offered = append(offered, p.String())
			}
			continue
		}
		tags, tagOnly := annotatedNames(d.Annotations)
		what := fmt.Sprintf("index.json manifest %d (%s)", i, strings.Join(append(append([]string(nil), tags...), d.Digest.String()), ", "))
		img, err := a.ociImage(what, d, want, 0)
		if err != nil {
			return nil, err
		}
		if img == nil {
			continue // no image: an artifact, a signature
		}
		if prev := byManifest[img.manifestDigest]; prev != nil {
			// One image under several names: Docker lists it once a tag.
			prev.tags = append(prev.tags, tags...)
			prev.tagOnly = append(prev.tagOnly, tagOnly...)
			continue
		}
		img.what, img.tags, img.tagOnly = what, tags, tagOnly
		byManifest[img.manifestDigest] = img
		imgs = append(imgs, img)
	}
	if len(imgs) == 0 && len(offered) > 0 {
		return nil, fmt.Errorf("%w: index.json offers %s; this machine is %s", ErrPlatform, strings.Join(offered, ", "), want.String())
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("%w: index.json lists no image manifest", ErrArchive)
	}
	return imgs, nil
}

// ociImage resolves a descriptor of the layout to an image: an index to
// its manifest for the platform, as Pull does. Anything else is nil.
func (a *imageArchive) ociImage(what string, d v1.Descriptor, want v1.Platform, depth int) (*archImage, error) {
	switch {
	case d.MediaType.IsIndex():
		if depth > 3 {
			return nil, fmt.Errorf("%w: %s: indexes nested more than 4 deep", ErrArchive, what)
		}
		b, err := a.readBlob(what, d)
		if err != nil {
			return nil, err
		}
		im, err := v1.ParseIndexManifest(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrArchive, what, err)
		}
		child, err := choosePlatform(what, im, want)
		if err != nil {
			return nil, err
		}
		img, err := a.ociImage(fmt.Sprintf("%s, manifest %s", what, child.Digest), child, want, depth+1)
		if err != nil || img == nil {
			return img, err
		}
		img.indexDigest = d.Digest
		return img, nil
	case d.MediaType.IsImage():
		b, err := a.readBlob(what, d)
		if err != nil {
			return nil, err
		}
		m, err := v1.ParseManifest(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrArchive, what, err)
		}
		img := &archImage{what: what, manifestDigest: d.Digest, configDigest: m.Config.Digest, configSize: m.Config.Size}
		cb, err := a.readBlob(what+" config", m.Config)
		if err != nil {
			return nil, err
		}
		if err := img.parseConfig(cb, len(m.Layers), want); err != nil {
			return nil, err
		}
		for j, l := range m.Layers {
			file := blobName(l.Digest)
			f, ok := a.stat(file)
			if !ok {
				return nil, fmt.Errorf("%w: %s: layer %d: blob %s is not in the archive", ErrArchive, what, j, l.Digest)
			}
			if f.size != l.Size {
				return nil, fmt.Errorf("%w: %s: layer %d: blob %s has %d bytes, the manifest says %d", ErrVerify, what, j, l.Digest, f.size, l.Size)
			}
			img.layers = append(img.layers, archLayer{file: file, blob: l.Digest, mediaType: l.MediaType, size: l.Size, diffID: img.config.RootFS.DiffIDs[j]})
		}
		return img, nil
	default:
		return nil, nil
	}
}

// parseConfig parses the image's config, checks that it has a diffID for
// each of the layers and that it is for the platform.
func (img *archImage) parseConfig(b []byte, layers int, want v1.Platform) error {
	cfg, err := v1.ParseConfigFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: %s: config: %v", ErrArchive, img.what, err)
	}
	if len(cfg.RootFS.DiffIDs) != layers {
		return fmt.Errorf("%w: %s: %d layers, its config %d diffIDs", ErrVerify, img.what, layers, len(cfg.RootFS.DiffIDs))
	}
	got := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	if got.OS != "" && got.Architecture != "" && !platformMatches(got, want) {
		return fmt.Errorf("%w: %s is for %s; this machine is %s", ErrPlatform, img.what, got.String(), want.String())
	}
	img.config = cfg
	return nil
}

// readBlob reads a small blob of the layout (a manifest, an index, a
// config) and checks it against its descriptor.
func (a *imageArchive) readBlob(what string, d v1.Descriptor) ([]byte, error) {
	if d.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("%w: %s: digest %s: only sha256 is supported", ErrArchive, what, d.Digest)
	}
	file := blobName(d.Digest)
	if !a.has(file) {
		return nil, fmt.Errorf("%w: %s: blob %s is not in the archive", ErrArchive, what, d.Digest)
	}
	b, err := a.readFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if got := sha256Of(b); got != d.Digest {
		return nil, &mismatchError{what: what + " " + file, want: d.Digest.String(), got: got.String()}
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("%w: %s: blob %s has %d bytes, its descriptor says %d", ErrVerify, what, d.Digest, len(b), d.Size)
	}
	return b, nil
}

func blobName(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// annotatedNames are the names a descriptor of index.json gives its
// image: containerd's full reference, else the OCI's ref.name if it is
// one (holds '/', ':' or '@', as containerd tells them apart), which is
// otherwise a tag without a repository.
func annotatedNames(ann map[string]string) (tags, tagOnly []string) {
	if n := ann[annotationImageName]; n != "" {
		return []string{n}, nil
	}
	n := ann[annotationRefName]
	switch {
	case n == "":
		return nil, nil
	case strings.ContainsAny(n, "/:@"):
		return []string{n}, nil
	default:
		return nil, []string{n}
	}
}

var (
	blobFileName   = regexp.MustCompile(`^blobs/sha256/([0-9a-f]{64})$`)
	configFileName = regexp.MustCompile(`^(?:sha256:)?([0-9a-f]{64})(?:\.json)?$`)
)

// digestInName is the digest a file's name in the archive stands for:
// blobs/sha256/<hex>, and for a config also `docker save`'s <hex>.json
// and go-containerregistry's sha256:<hex>.
func digestInName(file string, config bool) (v1.Hash, bool) {
	file = cleanArchiveName(file)
	m := blobFileName.FindStringSubmatch(file)
	if m == nil && config {
		m = configFileName.FindStringSubmatch(file)
	}
	if m == nil {
		return v1.Hash{}, false
	}
	return v1.Hash{Algorithm: "sha256", Hex: m[1]}, true
}

func sha256Of(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// tagImages gives each image its tags, fully qualified: those it
// carries, and extra for an archive's only image. An image left without
// one, or a tag given two images, is ErrArchive.
func tagImages(imgs []*archImage, extra *name.Tag) ([][]name.Tag, error) {
	if extra != nil && len(imgs) != 1 {
		return nil, fmt.Errorf("%w: a name was given for the archive's image, but it holds %d images: tag them before saving them", ErrArchive, len(imgs))
	}
	out := make([][]name.Tag, len(imgs))
	owner := map[string]int{}
	for i, img := range imgs {
		var tags []name.Tag
		for _, t := range img.tags {
			ref, err := parseRef(t)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: name %q: %w", ErrArchive, img.what, t, err)
			}
			if tag, ok := ref.(name.Tag); ok {
				tags = append(tags, tag)
			}
		}
		if extra != nil {
			tags = append(tags, *extra)
		}
		seen := map[string]bool{}
		for _, t := range tags {
			if seen[t.Name()] {
				continue
			}
			seen[t.Name()] = true
			if j, ok := owner[t.Name()]; ok && j != i {
				return nil, fmt.Errorf("%w: %s names two images of the archive, %s and %s", ErrArchive, t.Name(), imgs[j].what, img.what)
			}
			owner[t.Name()] = i
			out[i] = append(out[i], t)
		}
		if len(out[i]) == 0 {
			msg := fmt.Sprintf("%s (config %s) carries no name: give it one (svcnet load --tag REPO:TAG)", img.what, img.configDigest)
			if len(img.tagOnly) > 0 {
				msg += fmt.Sprintf("; its only name, %q, is a tag without a repository", img.tagOnly[0])
			}
			return nil, fmt.Errorf("%w: %s", ErrArchive, msg)
		}
	}
	return out, nil
}

// loadedLayer is a layer of the archive as the store has it after the
// load.
type loadedLayer struct {
	blob v1.Hash
	size int64
}

// layerWork is a layer to unpack: the first of the archive's layers
// with its diffID.
type layerWork struct {
	l     archLayer
	index int
	img   *archImage
	tmp   string  // where it is unpacked
	blob  v1.Hash // its blob's digest, known once it is read
}

// loadLayers unpacks the layers the store lacks into tmp/, verified, and
// only when all have verified renames them into place. It returns each
// diffID's blob and how many layers it added.
func (s *Store) loadLayers(ctx context.Context, a *imageArchive, imgs []*archImage) (map[v1.Hash]loadedLayer, int, error) {
	layers := map[v1.Hash]loadedLayer{}
	var work []*layerWork
	for _, img := range imgs {
		for i, l := range img.layers {
			if _, ok := layers[l.diffID]; ok {
				continue
			}
			layers[l.diffID] = loadedLayer{blob: l.blob, size: l.size}
			if s.hasLayer(l.diffID) {
				if l.blob == (v1.Hash{}) {
					blob, err := a.blobDigest(ctx, l)
					if err != nil {
						return nil, 0, err
					}
					layers[l.diffID] = loadedLayer{blob: blob, size: l.size}
				}
				continue
			}
			work = append(work, &layerWork{l: l, index: i, img: img})
		}
	}
	// Whatever is not renamed into place goes.
	defer func() {
		for _, w := range work {
			if w.tmp != "" {
				os.RemoveAll(w.tmp)
			}
		}
	}()

	for _, w := range work {
		tmp, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), "load-"+w.l.diffID.Hex+"-")
		if err != nil {
			return nil, 0, err
		}
		w.tmp = tmp
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(layerJobs)
	for _, w := range work {
		g.Go(func() error {
			r, _ := a.open(w.l.file)
			j := layerJob{index: w.index, diffID: w.l.diffID, blob: v1.Descriptor{Digest: w.l.blob, Size: w.l.size}, file: w.l.file}
			blob, err := unpackVerified(ctxReader{gctx, r}, filepath.Join(w.tmp, "fs"), j)
			if err != nil {
				if gctx.Err() != nil && isCanceled(err) {
					return gctx.Err()
				}
				return fmt.Errorf("%s: %w", w.img.what, err)
			}
			w.blob = blob
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}

	for _, w := range work {
		layers[w.l.diffID] = loadedLayer{blob: w.blob, size: w.l.size}
		mt := w.l.mediaType
		if mt == "" {
			mt = types.DockerUncompressedLayer
			if c, err := a.compressed(w.l); err == nil && c {
				mt = types.DockerLayer
			}
		}
		rec, err := json.Marshal(layerRecord{DiffID: w.l.diffID.String(), Digest: w.blob.String(), MediaType: string(mt), Size: w.l.size})
		if err != nil {
			return nil, 0, err
		}
		if err := os.WriteFile(filepath.Join(w.tmp, "layer.json"), rec, 0o644); err != nil {
			return nil, 0, err
		}
		if err := os.Chmod(w.tmp, 0o711); err != nil {
			return nil, 0, err
		}
	}
	// As for a pulled layer: complete on disk before it is published. One
	// syncfs covers them all.
	if len(work) > 0 {
		if err := syncFS(filepath.Join(s.root, "tmp")); err != nil {
			return nil, 0, err
		}
	}
	added := 0
	for _, w := range work {
		ok, err := s.publishLayer(ctx, w.tmp, w.l.diffID)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			w.tmp = ""
			added++
		}
	}
	return layers, added, nil
}

// publishLayer renames a verified layer into place under its lock, unless
// another pull or load has put it there meanwhile.
func (s *Store) publishLayer(ctx context.Context, tmp string, diffID v1.Hash) (bool, error) {
	unlock, err := s.lock(ctx, "layer-"+diffID.Hex)
	if err != nil {
		return false, err
	}
	defer unlock()
	if s.hasLayer(diffID) {
		return false, nil
	}
	if err := os.Rename(tmp, s.layerPath(diffID)); err != nil {
		return false, err
	}
	return true, nil
}

// compressed tells whether a layer's blob is compressed.
func (a *imageArchive) compressed(l archLayer) (bool, error) {
	r, _ := a.open(l.file)
	magic := make([]byte, 4)
	n, err := r.ReadAt(magic, 0)
	if err != nil && err != io.EOF {
		return false, err
	}
	return isCompressed(magic[:n]), nil
}

// blobDigest is the digest of a layer's blob that the archive does not
// name (a layer.tar) and the store need not unpack: a plain tar's is its
// diffID, a compressed one's is hashed.
func (a *imageArchive) blobDigest(ctx context.Context, l archLayer) (v1.Hash, error) {
	c, err := a.compressed(l)
	if err != nil {
		return v1.Hash{}, err
	}
	if !c {
		return l.diffID, nil
	}
	r, _ := a.open(l.file)
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, r}); err != nil {
		return v1.Hash{}, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// recordLoaded records an image under each of its tags and digest names,
// once its layers are in place.
func (s *Store) recordLoaded(ai *archImage, tags []name.Tag, layers map[v1.Hash]loadedLayer) (LoadedImage, error) {
	base := Image{
		Digest:         ai.configDigest.String(),
		ManifestDigest: ai.configDigest.String(),
		ConfigDigest:   ai.configDigest.String(),
		Platform:       nodePlatform().String(),
		Config:         runConfig(ai.config.Config),
		Size:           ai.configSize,
	}
	if ai.manifestDigest != (v1.Hash{}) {
		base.ManifestDigest = ai.manifestDigest.String()
	}
	if c := ai.config; c.OS != "" && c.Architecture != "" {
		base.Platform = v1.Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant}.String()
	}
	for _, l := range ai.layers {
		ll := layers[l.diffID]
		base.Layers = append(base.Layers, Layer{DiffID: l.diffID.String(), Digest: ll.blob.String(), Size: ll.size})
		base.Size += ll.size
	}
	var out LoadedImage
	for _, t := range tags {
		img := base
		img.Ref = t.Name()
		img.ID = t.Context().Digest(base.Digest).Name()
		names := []string{img.Ref, img.ID}
		for _, d := range []v1.Hash{ai.manifestDigest, ai.indexDigest} {
			if d != (v1.Hash{}) {
				names = append(names, t.Context().Digest(d.String()).Name())
			}
		}
		if err := s.saveImage(&img, names...); err != nil {
			return LoadedImage{}, err
		}
		out.Tags = append(out.Tags, img.Ref)
		if out.Image == nil {
			img.Layers = append([]Layer(nil), base.Layers...)
			if err := s.fillDirs(&img); err != nil {
				return LoadedImage{}, err
			}
			out.Image = &img
		}
	}
	return out, nil
}
