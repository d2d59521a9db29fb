// Package imagestore is the machine-wide store of container images pulled
// from registries: it resolves a reference (by tag or digest, a multi-arch
// index to this node's platform), fetches the layers, verifies them and
// unpacks each layer once into a directory that overlayfs takes as a lower
// directory. Images also come from archives (Load: `docker save`, OCI
// image layouts), verified and shared by layer alike.
//
// One store serves every node agent of every cluster on the machine, so
// several processes use it at once. Its layout under the root:
//
//	layers/sha256/<diffID>/fs/          the unpacked layer, overlay form
//	layers/sha256/<diffID>/layer.json   what was fetched: blob digest, sizes
//	images/<sha256 of the name>.json    an Image record, one per reference
//	                                    name (tag and repo@digest)
//	locks/<key>.lock                    flock files, one per layer
//	tmp/<key>-<random>/                 work in progress
//
// Invariants:
//   - A directory under layers/ exists only complete and verified: a layer
//     is unpacked into tmp/, both its blob digest and its diffID checked,
//     synced, and renamed into place. tmp/ is on the same file system, so
//     the rename is atomic. Nothing partial is ever under layers/.
//   - Only the holder of a layer's lock writes its tmp/layer-… directories;
//     the holder removes any left by a crashed earlier holder before it
//     starts. Import and Load unpack into tmp/import-… and tmp/load-…
//     without it and take it around the rename, which they skip when the
//     layer is there already.
//   - Image records are written to a temporary file and renamed, so a
//     reader sees a whole record or none, and a record is written only
//     after all its layers are in place.
//
// Within a process, concurrent pulls of one image, and of one layer, share
// a single fetch (singleflight); across processes, the lock serialises the
// work and the second process finds the layer done.
package imagestore
