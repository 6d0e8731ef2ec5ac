#!/usr/bin/python3
"""Write a PyTorch state dict or a NumPy .npz as safetensors, the layout rcsweep reads
(docs/CHECKPOINTS.md).

    scripts/convert_checkpoint.py MODEL_DIR                  # pytorch_model.bin -> model.safetensors
                                                             # (or each shard of pytorch_model.bin.index.json)
    scripts/convert_checkpoint.py pytorch_model.bin -o OUT.safetensors
    scripts/convert_checkpoint.py weights.npz -o model.safetensors

A .bin/.pt/.pth file is read with torch.load(path, map_location="cpu", weights_only=True) (no
pickled code runs) and needs torch (Debian package python3-torch, or pip); a .npz needs only
NumPy. Every tensor keeps its dtype (float64, float32, float16 and bfloat16 are the ones rcsweep
converts; integer buffers such as position_ids are written as I64 etc. and ignored by rcsweep).
Names are kept as they are. Exit 0 on success, 2 on bad input or a missing torch.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

# NumPy dtype -> safetensors dtype name (little-endian data)
DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32", "int16": "I16",
          "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL"}
TORCH_SUFFIXES = (".bin", ".pt", ".pth")


class ConvertError(Exception):
    """Bad input: printed as `error: ...`, exit code 2."""


def tensor_entry(name, array, dtype=None):
    """(safetensors dtype, shape, little-endian bytes) of a NumPy array; `dtype` overrides the name
    (BF16: the array holds the raw uint16 bits)."""
    array = np.asarray(array)
    if dtype is None:
        dtype = DTYPES.get(array.dtype.name)
        if dtype is None:
            raise ConvertError(f"tensor {name!r}: dtype {array.dtype} has no safetensors equivalent")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return dtype, list(array.shape), little.tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: (dtype, shape, bytes)} as one safetensors file, tensors in name order, the
    header padded with spaces to a multiple of 8 bytes (the data area then starts aligned).
    Written to a temporary file first, then renamed: `path` is never left half written."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(len(text).to_bytes(8, "little"))
            out.write(text)
            for name in sorted(tensors):
                out.write(tensors[name][2])
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return offset


def import_torch():
    try:
        import torch  # noqa: PLC0415 (optional dependency)
    except ImportError as e:
        raise ConvertError(f"reading a PyTorch file needs torch, which is not installed ({e}); install it "
                           "(Debian: apt-get install python3-torch; or pip install torch), or save the state "
                           "dict as .npz where torch is (numpy.savez(path, **{k: v.float().numpy() ...}))") from None
    return torch


def read_torch(path):
    """The tensors of a PyTorch state dict file as {name: (dtype, shape, bytes)}."""
    torch = import_torch()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a file it cannot read
        raise ConvertError(f"{path}: torch.load(weights_only=True) failed: {e}") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]  # a training checkpoint (e.g. PyTorch Lightning)
    if not isinstance(state, dict):
        raise ConvertError(f"{path}: holds a {type(state).__name__}, not a state dict (a dict of tensors)")
    tensors, skipped = {}, []
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            skipped.append(str(name))
            continue
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            tensors[str(name)] = tensor_entry(name, t.view(torch.int16).numpy().view(np.uint16), "BF16")
        else:
            try:
                array = t.numpy()
            except TypeError as e:
                raise ConvertError(f"{path}: tensor {name!r}: {e}") from None
            tensors[str(name)] = tensor_entry(name, array)
    if skipped:
        print(f"note: {path}: {len(skipped)} entries are not tensors, not written: {', '.join(skipped[:5])}"
              + (" ..." if len(skipped) > 5 else ""), file=sys.stderr)
    return tensors


def read_npz(path):
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: tensor_entry(name, npz[name]) for name in npz.files}
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: not a readable .npz of arrays: {e}") from None


def read_tensors(path):
    path = Path(path)
    if not path.is_file():
        raise ConvertError(f"{path}: no such file")
    if path.suffix == ".npz":
        return read_npz(path), {"format": "np"}
    if path.suffix in TORCH_SUFFIXES:
        return read_torch(path), {"format": "pt"}
    raise ConvertError(f"{path}: unknown kind of file (a PyTorch {'/'.join(TORCH_SUFFIXES)} or a NumPy .npz)")


def convert_file(source, output):
    tensors, metadata = read_tensors(source)
    size = write_safetensors(output, tensors, metadata)
    print(f"{source} -> {output}: {len(tensors)} tensors, {size} bytes of data")
    return tensors, size


def convert_folder(folder):
    """A Hugging Face folder: pytorch_model.bin -> model.safetensors, or each shard of
    pytorch_model.bin.index.json -> model-0000k-of-0000n.safetensors and model.safetensors.index.json."""
    folder = Path(folder)
    index = folder / "pytorch_model.bin.index.json"
    if (folder / "pytorch_model.bin").is_file():
        convert_file(folder / "pytorch_model.bin", folder / "model.safetensors")
        return
    if not index.is_file():
        raise ConvertError(f"{folder}: no pytorch_model.bin and no pytorch_model.bin.index.json")
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConvertError(f"{index}: not an index with a weight_map: {e}") from None
    shards = sorted(set(weight_map.values()))
    new_map, total = {}, 0
    for k, shard in enumerate(shards, 1):
        if "/" in shard or shard in (".", ".."):
            raise ConvertError(f"{index}: shard {shard!r} is not a file name in the folder")
        name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        tensors, size = convert_file(folder / shard, folder / name)
        new_map.update({t: name for t in tensors})
        total += size
    text = json.dumps({"metadata": {"total_size": total}, "weight_map": dict(sorted(new_map.items()))}, indent=2)
    (folder / "model.safetensors.index.json").write_text(text + "\n")
    print(f"{folder / 'model.safetensors.index.json'}: {len(new_map)} tensors in {len(shards)} shards")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("input", help="a model folder, a PyTorch .bin/.pt/.pth state dict, or a .npz")
    parser.add_argument("-o", "--output", help="the safetensors file to write (default: model.safetensors "
                        "next to INPUT; not for a folder)")
    args = parser.parse_args(argv)
    try:
        source = Path(args.input)
        if source.is_dir():
            if args.output:
                raise ConvertError("-o is for a single file; a folder is converted in place")
            convert_folder(source)
        else:
            convert_file(source, Path(args.output) if args.output else source.parent / "model.safetensors")
    except ConvertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
