"""scripts/convert_checkpoint.py: the safetensors files it writes, read back by a reader written
here from the format's definition (8-byte little-endian header length, JSON header, data area);
the PyTorch path only where torch is installed, and its clear refusal where it is not."""
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "convert_checkpoint.py"
PYTHON = "/usr/bin/python3"
NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "?",
         "BF16": "<u2"}  # BF16: the raw bits


def read_safetensors(path):
    """(header without __metadata__, metadata, {name: array}); asserts what the format requires."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw)
    assert (8 + n) % 8 == 0, "the data area starts 8-byte aligned"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    arrays, end = {}, 0
    for name in sorted(header, key=lambda k: header[k]["data_offsets"][0]):
        entry = header[name]
        begin, stop = entry["data_offsets"]
        assert begin == end, "tensors follow each other without gaps or overlaps"
        dtype = np.dtype(NUMPY[entry["dtype"]])
        assert stop - begin == int(np.prod(entry["shape"], dtype=np.int64)) * dtype.itemsize
        arrays[name] = np.frombuffer(data[begin:stop], dtype=dtype).reshape(entry["shape"])
        end = stop
    assert end == len(data)
    return header, metadata, arrays


def convert(*args, env=None):
    return subprocess.run([PYTHON, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env)


def test_npz_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    arrays = {
        "encoder.layer.0.attention.self.query.weight": rng.standard_normal((4, 3)),
        "embeddings.word_embeddings.weight": rng.standard_normal((5, 2)).astype(np.float32),
        "half": np.array([1.0, -0.0, np.inf, 6.1e-5, 65504.0], dtype=np.float16),
        "big_endian": np.arange(3, dtype=">f8"),
        "position_ids": np.arange(6, dtype=np.int64).reshape(1, 6),
        "scalar": np.float64(2.5),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "mask": np.array([True, False]),
    }
    np.savez(tmp_path / "w.npz", **arrays)
    result = convert(tmp_path / "w.npz")
    assert result.returncode == 0, result.stderr
    header, metadata, back = read_safetensors(tmp_path / "model.safetensors")  # the default output
    assert metadata == {"format": "np"}
    assert set(back) == set(arrays)
    assert header["big_endian"]["dtype"] == "F64" and back["big_endian"].dtype == np.dtype("<f8")
    assert header["half"]["dtype"] == "F16" and header["mask"]["dtype"] == "BOOL"
    assert header["scalar"]["shape"] == [] and header["empty"]["shape"] == [0, 4]
    for name, a in arrays.items():
        a = np.asarray(a)
        assert back[name].shape == a.shape
        assert back[name].tobytes() == a.astype(a.dtype.newbyteorder("<")).tobytes(), name  # bit for bit
    assert list(header) == sorted(header)


def test_refusals(tmp_path):
    (tmp_path / "w.txt").write_text("x")
    result = convert(tmp_path / "w.txt")
    assert result.returncode == 2 and "unknown kind of file" in result.stderr
    result = convert(tmp_path / "none.npz")
    assert result.returncode == 2 and "no such file" in result.stderr
    np.savez(tmp_path / "c.npz", c=np.array([1 + 2j]))
    result = convert(tmp_path / "c.npz", "-o", tmp_path / "c.safetensors")
    assert result.returncode == 2 and "tensor 'c': dtype complex128" in result.stderr
    assert not (tmp_path / "c.safetensors").exists() and not list(tmp_path.glob("*.tmp"))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert convert(tmp_path / "bad.npz").returncode == 2
    result = convert(tmp_path)
    assert result.returncode == 2 and "no pytorch_model.bin" in result.stderr


def test_missing_torch_is_said_clearly(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ImportError('No module named torch')\n")
    (tmp_path / "pytorch_model.bin").write_bytes(b"PK")
    result = convert(tmp_path / "pytorch_model.bin", env={"PYTHONPATH": str(fake), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert "needs torch, which is not installed" in result.stderr and "python3-torch" in result.stderr
    assert ".npz" in result.stderr and "Traceback" not in result.stderr


def test_torch_state_dicts(tmp_path):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(3)
    state = {
        "w32": torch.randn(3, 4, generator=gen),
        "w64": torch.randn(2, dtype=torch.float64, generator=gen),
        "w16": torch.randn(5, generator=gen).half(),
        "wbf": torch.tensor([1.0, -3.0, 3.140625, float("inf"), 1e-40]).bfloat16(),
        "view": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
        "ids": torch.arange(4),
    }
    torch.save(state, tmp_path / "pytorch_model.bin")
    result = convert(tmp_path)  # a folder: pytorch_model.bin -> model.safetensors
    assert result.returncode == 0, result.stderr
    header, metadata, back = read_safetensors(tmp_path / "model.safetensors")
    assert metadata == {"format": "pt"}
    assert header["wbf"]["dtype"] == "BF16" and header["ids"]["dtype"] == "I64"
    for name, t in state.items():
        if t.dtype == torch.bfloat16:
            assert back[name].tobytes() == t.view(torch.int16).numpy().tobytes()
        else:
            assert np.array_equal(back[name], t.contiguous().numpy())

    # A sharded .bin checkpoint becomes a sharded safetensors one with its index.
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    torch.save({"a": state["w32"]}, sharded / "pytorch_model-00001-of-00002.bin")
    torch.save({"b": state["w64"], "c": state["wbf"]}, sharded / "pytorch_model-00002-of-00002.bin")
    (sharded / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {
        "a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin",
        "c": "pytorch_model-00002-of-00002.bin"}}))
    assert convert(sharded).returncode == 0
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                                   "c": "model-00002-of-00002.safetensors"}
    assert set(read_safetensors(sharded / "model-00002-of-00002.safetensors")[2]) == {"b", "c"}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
