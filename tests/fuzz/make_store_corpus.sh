#!/usr/bin/env bash
# Regenerates the seed corpus of the store fuzzer, tests/fuzz/corpus/store/ (docs/FUZZING.md):
# real stores made by rcsweep from tests/fuzz/store_plans/*.toml, and damaged or foreign variants
# of them (deterministic: fixed offsets, no randomness). Run it after a change of the schema or of
# the plan files, then commit the result.
#   bash tests/fuzz/make_store_corpus.sh [path/to/rcsweep]   (default: build/rcsweep)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rcsweep=${1:-$here/../../build/rcsweep}
[[ -x $rcsweep ]] || { echo "make_store_corpus: $rcsweep is not an executable rcsweep (give its path)" >&2; exit 2; }
out=$here/corpus/store
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$rcsweep" run "$here/store_plans/a_small.toml" -o "$tmp/small-done.h5" -q
"$rcsweep" run "$here/store_plans/a_small.toml" -o "$tmp/small-partial.h5" -q --shard 0/2
"$rcsweep" run "$here/store_plans/b_full.toml" -o "$tmp/full-done.h5" -q

/usr/bin/python3 - "$tmp" <<'PY'
import shutil, sys
import h5py

tmp = sys.argv[1]
src = f"{tmp}/small-done.h5"
def variant(name, base=src):
    shutil.copy(base, f"{tmp}/{name}")
    return f"{tmp}/{name}"

with h5py.File(variant("small-schema3.h5"), "r+") as f:        # a future schema: refused
    f.attrs["schema_version"] = 3
with h5py.File(variant("small-no-theory.h5"), "r+") as f:      # older rcsweep: info yes, resume no
    del f["theory"]
with h5py.File(variant("small-bad-status.h5"), "r+") as f:     # a status outside the enum
    t = f["tasks"][...]
    t["status"][1] = 9
    f["tasks"][...] = t
with h5py.File(variant("small-short-tasks.h5"), "r+") as f:    # n_tasks says 4, /tasks has fewer
    f.attrs["n_tasks"] = 7
# HDF5, but not an rcsweep store; libver "latest" (checksummed object headers, like rcsweep's):
# HDF5 1.10.8 crashes on mutated unchecksummed (v1) headers (docs/FUZZING.md).
with h5py.File(variant("foreign.h5"), "w", libver="latest") as f:
    f.attrs["format"] = "other"
    f["x"] = [1.0, 2.0]

data = open(src, "rb").read()
open(f"{tmp}/small-truncated-4k.h5", "wb").write(data[:4096])
open(f"{tmp}/small-truncated-half.h5", "wb").write(data[: len(data) // 2])
# Flip one bit in the superblock and a few in the object headers (fixed offsets).
for name, offsets in (("small-flip-superblock.h5", [40]), ("small-flip-headers.h5", [700, 1500, 2600, 5200])):
    b = bytearray(data)
    for o in offsets:
        b[o] ^= 0x10
    open(f"{tmp}/{name}", "wb").write(bytes(b))
open(f"{tmp}/empty.h5", "wb").write(b"")
open(f"{tmp}/not-hdf5.h5", "wb").write(b"[sweep]\nname = \"not a store\"\n")
PY

rm -f "$out"/*.h5
mkdir -p "$out"
cp "$tmp"/*.h5 "$out/"
ls -l "$out"
