"""Read an rcsweep HDF5 store (docs/SCHEMA.md) as labelled arrays.

    load(path)      -> xarray.Dataset   one dimension per grid dimension, then `replicate`, `layer`
    tidy(path)      -> pandas.DataFrame one row per (task, layer)
    spectrum(src, name, layer, **sel)   one stored spectrum (singular values or eigenvalues)

Dimensions of `load`:
  - one per grid dimension, in grid order (docs/CONFIG.md "The grid"): an `[axes]` entry is a
    dimension named after its parameter, with the swept values as its coordinate (str for choices);
    a `[[zip]]` table is ONE dimension named `zip0`, `zip1`, ... whose index coordinate is
    0..n-1 and every member parameter is a coordinate along it (e.g. `T` and `d` on `zip0`), so
    `ds.sel(zip0=2)` or `ds.where(ds.T == 64, drop=True)` select a (T, d) pair;
  - `replicate` (0..replicates-1) and `layer` (0..L_max).
Data variables:
  - the `/layers` metrics, dims (grid..., replicate, layer): the 13 core ones every store has and
    any other the store holds (`layer_metrics`), each with the store's `description`; a metric the
    store lacks (one added to the registry after the store was made) is not there;
  - `/theory/<q>` as `theory_<q>`, dims (grid..., replicate);
  - `/grad` (when stored): `grad_log10_g`, `grad_stderr` on (grid..., replicate, layer) with layer 0
    NaN (the gradient of layer l = 1..L_max sits at layer l), and with gradients = "all"
    `grad_log10_g_all`, `grad_stderr_all` on (grid..., replicate, L, layer): L = 1..L_max is the
    output depth;
  - `status` (int8, the store's /tasks enumeration: 0 pending 1 done 2 failed 3 diverged 4 not_needed
    5 vanished; its long_name lists them), `task` (the task id, = row of /tasks),
    `wall_s`, `rank`, `message` (str), dims (grid..., replicate).
Coordinates besides the dimensions: every `/points` parameter that is not a dimension coordinate,
as a scalar when it is the same at every point, else over the grid dimensions (a swept scale axis
written as a string, e.g. skip_scale = [1.0, "inv_sqrt_d"], also gets `<name>_value`, the resolved
number). `depth` is L_max; a swept `depth` list is in attrs["requested_depths"].
Attributes: every root attribute of the store (config, plan_hash, git_commit, ...) plus `path`;
each variable has `long_name`, `symbol` (matplotlib mathtext), `units` ("1" = dimensionless) and
the store's `description`. Names and descriptions come from the store; `METRICS` only adds the
symbol, a short long name and the units (the metric registry's, src/metrics/registry.hpp) of the
metrics it knows: a metric it does not know is labelled by its name and description, with the
store's `units` (stores made before that attribute: "1").

Missing values: rows of tasks that are pending, failed or not needed (status 4: a replicate that
an adaptive replicate rule did not run) are NaN (a pending task may hold partial rows in a live
store; they are masked), a diverged or vanished task keeps the layers it reached. So a store being written, a
killed one, a `--shard` one or a merged one all load; open read-only with HDF5 file locking off, so
a running sweep can be read (what you see is its last flush).

Over replicates (points may have different numbers of done replicates):
    replicate_stats(src)      -> xarray.Dataset   per point and layer: n, mean, standard error
    tidy(path, by="point")    -> pandas.DataFrame one row per (point, layer) with the same
Only done tasks (status 1) count there; every other status contributes nothing.
"""
from __future__ import annotations

import itertools
import math
import os

import h5py
import numpy as np

SCHEMA_VERSION = 2  # the store layout this toolkit reads: schema_version in src/store/store.hpp
# The task statuses of schema 2, code -> name: the members check_store requires of the /tasks
# status enumeration (a store names its own: task_statuses(f)).
STATUS = {0: "pending", 1: "done", 2: "failed", 3: "diverged", 4: "not_needed", 5: "vanished"}
DONE, DIVERGED, NOT_NEEDED, VANISHED = (next(c for c, n in STATUS.items() if n == name)
                                        for name in ("done", "diverged", "not_needed", "vanished"))
# The /layers metrics every store of schema 2 has, in storage order: the core metrics of the
# registry (its first n_core_metrics entries, src/metrics/registry.hpp), which check_store requires.
# A store may hold more (a metric added to the registry after this toolkit, or after schema 2):
# load() reads those too (layer_metrics), and replicate_stats summarises every one; a store made
# before such a metric lacks it, and the toolkit lists only what the store holds.
LAYER_METRICS = ("fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel", "m_s1",
                 "m_s2", "m_gap", "m_fro")
# The registry's metrics after the core ones that this toolkit knows, in storage order: checked as
# the core ones where a store has them (a store made before one lacks it).
LATER_METRICS = ("res_best",)


def core_metrics():
    """The metrics check_store requires: LAYER_METRICS, or as the engine (src/store/open.cpp
    required_metrics) its first N when the environment variable RCSWEEP_TEST_CORE_METRICS is a
    number N from 1 to their count: for the tests of a store made before a metric (every metric of
    today is core); any other value is ignored."""
    n = os.environ.get("RCSWEEP_TEST_CORE_METRICS", "")
    if n.isdigit() and n.isascii() and 1 <= int(n) <= len(LAYER_METRICS):
        return LAYER_METRICS[:int(n)]
    return LAYER_METRICS


# name -> (long name, mathtext symbol, units): labels for plots. "1": dimensionless; "X" : in units
# of the input X_0. A /layers metric's units are its registry entry's (src/metrics/registry.hpp;
# tests/python/test_metric_registry.py compares them); one missing here is labelled from the store.
METRICS = {
    "fro": ("Frobenius norm of X_l", r"$\|X_\ell\|_F$", "X"),
    "log_fro": ("log Frobenius norm of X_l", r"$\ln\|X_\ell\|_F$", "ln X"),
    "s1": ("largest singular value of X_l", r"$s_1(X_\ell)$", "X"),
    "s2": ("second singular value of X_l", r"$s_2(X_\ell)$", "X"),
    "sr_cov": ("stable rank of the covariance", r"$\mathrm{sr}(X_\ell X_\ell^\top)$", "1"),
    "sr_x": ("stable rank of the signal", r"$\mathrm{sr}(X_\ell)$", "1"),
    "mu": ("rank-collapse measure mu", r"$\mu(X_\ell)$", "X"),
    "mu_rel": ("normalised rank-collapse measure", r"$\mu(X_\ell)/\|X_\ell\|_F$", "1"),
    "res_rel": ("relative l1,inf residual", r"$\|\mathrm{res}(X_\ell)\|_{1,\infty}/\|X_\ell\|_{1,\infty}$", "1"),
    "res_best": ("relative l1,inf residual, best row vector",
                 r"$\min_x\|X_\ell-\mathbf{1}x^\top\|_{1,\infty}/\|X_\ell\|_{1,\infty}$", "1"),
    "m_s1": ("largest singular value of M_l", r"$s_1(M_\ell)$", "1"),
    "m_s2": ("second singular value of M_l", r"$s_2(M_\ell)$", "1"),
    "m_gap": ("spectral gap s1/s2 of M_l", r"$s_1(M_\ell)/s_2(M_\ell)$", "1"),
    "m_fro": ("Frobenius norm of M_l", r"$\|M_\ell\|_F$", "1"),
    "theory_C_M": ("max Frobenius norm of the mixer", r"$C_M$", "1"),
    "theory_S": ("max Frobenius norm of C_V", r"$S$", "1"),
    "theory_lambda_min": ("smallest |lambda| of Thm 4.1's condition", r"$\lambda_{\min}$", "1"),
    "theory_a_star": ("largest rate the condition admits", r"$a^*$", "1"),
    "theory_b": ("Thm 4.1 threshold b", r"$b$", "X^2"),
    "theory_bound_applies": ("Thm 4.1 bound applies: every hypothesis holds (0/1)", r"applies", "1"),
    "theory_bound_holds": ("observed mu respects the bound (0/1)", r"holds", "1"),
    "theory_bound_reason": ("why Thm 4.1's bound applies or not: 0 applies, 1 stack not covered, 2 rows not unit, "
                            "3 condition fails, 4 mu(X_0)^2 < b", r"reason", "1"),
    "grad_log10_g": ("log10 gradient norm at L = L_max", r"$\log_{10}\|\partial X_L/\partial W_{V,\ell}\|_F^2$", "1"),
    "grad_stderr": ("standard error of grad_log10_g", r"$\sigma(\log_{10} g)$", "1"),
    "grad_log10_g_all": ("log10 gradient norm for every output depth L", r"$\log_{10}\|\partial X_L/\partial W_{V,\ell}\|_F^2$", "1"),
    "grad_stderr_all": ("standard error of grad_log10_g_all", r"$\sigma(\log_{10} g)$", "1"),
    "status": ("task status: " + ", ".join(f"{c} {n.replace('_', ' ')}" for c, n in STATUS.items()), "status", "1"),
    "task": ("task id (row of /tasks)", "task", "1"),
    "wall_s": ("wall time of the task", r"$t$", "s"),
    "rank": ("MPI rank that ran the task (-1 before)", "rank", "1"),
    "message": ("why the task failed or diverged", "message", ""),
}
# name -> (smallest, largest) value the quantity can take (None: unbounded), from its definition
# (docs/MODELS.md): a stable rank sum s_i^p / s_1^p >= 1, s1/s2 >= 1, norms and singular values >= 0,
# mu = ||X - 1 x^T||_F <= ||X||_F (centring is an orthogonal projection), a_star = lambda^2/(S C_M +
# |lambda|)^2 <= 1, 0/1 flags. Bands drawn around means (plot.mean_band) are clipped to it.
RANGES = {
    "fro": (0, None), "s1": (0, None), "s2": (0, None), "mu": (0, None),
    "sr_cov": (1, None), "sr_x": (1, None), "mu_rel": (0, 1), "res_rel": (0, None), "res_best": (0, None),
    "m_s1": (0, None), "m_s2": (0, None), "m_gap": (1, None), "m_fro": (0, None),
    "theory_C_M": (0, None), "theory_S": (0, None), "theory_lambda_min": (0, None),
    "theory_a_star": (0, 1), "theory_b": (0, None), "theory_bound_applies": (0, 1),
    "theory_bound_holds": (0, 1), "theory_bound_reason": (0, 4), "grad_stderr": (0, None), "grad_stderr_all": (0, None),
    "wall_s": (0, None),
}
PARAMS = {  # coordinate name -> (long name, symbol)
    "T": ("context length", r"$T$"), "d": ("width", r"$d$"), "lambda": ("skip strength", r"$\lambda$"),
    "sigma_A": ("Markov relative std", r"$\sigma_A$"), "sigma_qk": ("std of W_Q, W_K", r"$\sigma_{qk}$"),
    "sigma_v": ("scale of W_V", r"$\sigma_v$"), "skip_scale": ("mixer-branch factor", r"$s$"),
    "layer": ("layer", r"$\ell$"), "L": ("output depth", r"$L$"), "replicate": ("replicate", "replicate"),
    "depth": ("depth L_max", r"$L$"), "heads": ("heads", r"$H$"), "alpha": ("SSM decay", r"$\alpha$"),
}
SPECTRA = {  # name -> (value datasets, offset dataset, length dataset, stored attribute)
    "x_sv": (("x_sv",), "x_sv_offset", "x_sv_length", "stored"),
    "m_sv": (("m_sv",), "m_offset", "m_length", "mixer_stored"),
    "m_eig": (("m_eig_re", "m_eig_im"), "m_offset", "m_length", "mixer_stored"),
}


class StoreInvalid(ValueError):
    """A file the readers refuse (docs/SCHEMA.md "What a store must be"): the message is the line
    `rcsweep info` and `rcsweep run` print for the same file, e.g. "PATH: damaged rcsweep store
    (/axes/d differs from the stored sweep at value 0)"; `path` and `reason` hold its parts."""

    def __init__(self, message, path=None, reason=None):
        super().__init__(message)
        self.path, self.reason = path, reason


def _refuse(path, why):
    raise StoreInvalid(f"{path}: damaged rcsweep store ({why})", path, why)


def open_store(path):
    """h5py.File read-only, HDF5 file locking off (readable while rcsweep writes it), after
    check_store: raises StoreInvalid (a ValueError) with the line `rcsweep info` prints for a file
    that is not an rcsweep store of this schema, FileNotFoundError for a missing file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise StoreInvalid(f"{path}: not a regular file", path)
    try:
        if not h5py.is_hdf5(path):
            raise StoreInvalid(f"{path}: not an HDF5 file", path)
    except OSError as e:
        raise StoreInvalid(f"{path}: cannot open for reading ({e.strerror or e})", path) from None
    try:
        try:
            f = h5py.File(path, "r", locking=False)
        except TypeError:  # h5py < 3.5
            os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")
            f = h5py.File(path, "r")
    except OSError as e:
        raise StoreInvalid(f"{path}: damaged HDF5 file ({e})", path) from None
    try:
        check_store(f, path)
    except BaseException:
        f.close()
        raise
    return f


F64, I64 = np.dtype("<f8"), np.dtype("<i8")
# /tasks fields (docs/SCHEMA.md "/tasks") and how the check names their types.
TASK_FIELDS = {"id": (np.dtype("<u8"), "uint64"), "point": (np.dtype("<u8"), "uint64"),
               "replicate": (np.dtype("<i4"), "int32"), "status": (np.dtype("i1"), "an int8 enumeration of statuses"),
               "wall_s": (F64, "float64"), "rank": (np.dtype("<i4"), "int32"),
               "message": (np.dtype("S256"), "a fixed 256-byte string")}
STATUS_VALUES = "0=pending,1=done,2=failed,3=diverged,4=not_needed,5=vanished"
# The model parameters of /points by kind (the registry of src/config/params.cpp; /points stores
# integers as int64, reals and scales as float64, choices as 16-byte strings).
INT_PARAMS = ("T", "d", "depth", "heads", "d_qk", "outliers_r", "mlp_ratio", "state_dim", "init_draw")
FLOAT_PARAMS = ("input_scale", "sigma_qk", "sigma_A", "lambda", "skip_scale", "sigma_v", "lambda_mlp", "alpha",
                "collapse_rate")
CHOICE_PARAMS = ("mixer", "input", "norm", "gap_fix", "value_init", "value_scale", "gate", "mlp", "bc_init", "block",
                 "init", "measure", "mask", "gated_norm")
THEORY_FLOATS = ("C_M", "S", "lambda_min", "a_star", "b", "bound_applies", "bound_holds")
MAX_SHORT_TEXT, MAX_LONG_TEXT = 4096, 64 << 20  # bytes (src/store/validate.hpp)
MAX_GRID, MAX_DEPTH, INT32_MAX = 1_000_000, 100_000, 2**31 - 1
# Root attributes in the order they are checked: (name, required, longest value in bytes).
ROOT_TEXTS = (("plan_hash", True, MAX_SHORT_TEXT), ("config", True, MAX_LONG_TEXT), ("overrides", False, MAX_LONG_TEXT),
              ("created", False, MAX_SHORT_TEXT), ("finished", False, MAX_SHORT_TEXT), ("reused", False, MAX_LONG_TEXT),
              ("rcsweep_version", False, MAX_SHORT_TEXT), ("git_commit", False, MAX_SHORT_TEXT),
              ("host", False, MAX_SHORT_TEXT), ("blas", False, MAX_SHORT_TEXT), ("hdf5_version", False, MAX_SHORT_TEXT),
              ("sweep_name", False, MAX_SHORT_TEXT))


class _Refused(Exception):
    """A reason, before the path is put in front of it (check_store)."""


def _bad(why):
    raise _Refused(why)


def _dims_text(shape):
    return " x ".join(str(n) for n in shape) if len(shape) else "scalar"


def _open_attr(obj, name, label):
    if name not in obj.attrs:
        _bad(f"{label} is missing")
    aid = h5py.h5a.open(obj.id, name.encode())
    if aid.get_space().get_simple_extent_npoints() != 1:
        _bad(f"{label} is not a scalar")
    return aid


def _attr_text(obj, name, max_bytes, where=""):
    """A scalar string attribute of at most max_bytes bytes, valid UTF-8 (h5::get_attr_text)."""
    label = f"{where}attribute '{name}'"
    aid = _open_attr(obj, name, label)
    t = aid.get_type()
    if t.get_class() != h5py.h5t.STRING:
        _bad(f"{label} is not a string")
    if t.is_variable_str():
        a = np.empty(aid.shape, dtype=h5py.string_dtype())
        aid.read(a)
        raw = a.flat[0]
        raw = b"" if raw is None else raw.encode() if isinstance(raw, str) else bytes(raw)
        raw = raw.split(b"\0")[0]
        if len(raw) > max_bytes:
            _bad(f"{label} is {len(raw)} bytes long, more than the {max_bytes} it may have")
    else:
        size = t.get_size()
        if size > max_bytes:
            _bad(f"{label} is {size} bytes long, more than the {max_bytes} it may have")
        a = np.empty(aid.shape, dtype=f"S{size}")
        aid.read(a)
        raw = bytes(a.flat[0]).split(b"\0")[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        _bad(f"{label} is not valid UTF-8")


def _attr_int(obj, name, dtype="<i8"):
    label = f"attribute '{name}'"
    aid = _open_attr(obj, name, label)
    if aid.get_type().get_class() != h5py.h5t.INTEGER:
        _bad(f"{label} is not an integer")
    a = np.empty(aid.shape, dtype=dtype)
    aid.read(a)
    return int(a.flat[0])


def _int_in(f, name, lo, hi):
    v = _attr_int(f, name)
    if v < lo or v > hi:
        _bad(f"attribute '{name}' = {v} is out of range ({lo} to {hi})")
    return v


def _fnv1a(text):
    h = 14695981039346656037
    for c in text.encode("utf-8"):
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _to_text(v):
    """config::to_text: a value as a string axis holds it."""
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    for prec in range(1, 17):
        s = "%.*g" % (prec, v)
        if float(s) == v:
            return s
    return "%.17g" % v


def _describe(v):
    """How the sweep-file parser names a value in its messages."""
    if isinstance(v, bool):
        return f"a boolean {'true' if v else 'false'}"
    if isinstance(v, str):
        return 'a string "' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, int):
        return f"an integer {v}"
    if isinstance(v, float):
        return f"a float {_to_text(v)}"
    return "an array" if isinstance(v, list) else "a table" if isinstance(v, dict) else "a date/time"


def _stored_sweep(attrs):
    """The sweep kept in `config`: the parts the readers use, checked as the engine checks them."""
    import tomllib

    config, digest = attrs["config"], attrs["plan_hash"]
    if len(digest) != 16 or any(c not in "0123456789abcdef" for c in digest):
        _bad("attribute 'plan_hash' is not 16 hexadecimal digits")
    if _fnv1a(config) != digest:
        _bad(f"attribute 'config' (the stored sweep) does not hash to plan_hash {digest} (it hashes to "
             f"{_fnv1a(config)})")
    invalid = "attribute 'config' (the stored sweep) is not a valid sweep file: "
    try:
        doc = tomllib.loads(config)
    except tomllib.TOMLDecodeError as e:
        _bad(invalid + str(e))
    sweep, model = doc.get("sweep", {}), doc.get("model", {})
    axes, zips = doc.get("axes", {}), doc.get("zip", [])
    if not all(isinstance(x, dict) for x in (sweep, model, axes)) or not isinstance(zips, list) or \
            not all(isinstance(z, dict) for z in zips):
        _bad(invalid + "[sweep], [model], [axes] and [[zip]] must be tables")
    reps = sweep.get("replicates", 1)
    adaptive_min = None
    if isinstance(reps, dict):  # adaptive replicates: checked as config::parsing::count_key does
        counts = {}
        for key, lo in (("min", 2), ("max", 2), ("step", 1)):
            v = reps.get(key)
            if v is None:
                _bad(invalid + f"sweep.replicates.{key}: required: an integer >= {lo}")
            if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > MAX_GRID:
                _bad(invalid + f"sweep.replicates.{key}: must be an integer from {lo} to {MAX_GRID}, got {_describe(v)}")
            counts[key] = v
        if counts["min"] > counts["max"]:
            _bad(invalid + f"sweep.replicates.min: must be <= max ({counts['max']}), got {counts['min']}")
        reps, adaptive_min = counts["max"], counts["min"]
    elif isinstance(reps, bool) or not isinstance(reps, int):
        _bad(invalid + f"sweep.replicates: must be an integer or a table, got {_describe(reps)}")
    # Grid dimensions: [axes] entries (depth is not one), then each [[zip]] table.
    dims = [(p, {p: v}) for p, v in axes.items() if p != "depth"] + [(f"zip{k}", dict(z)) for k, z in enumerate(zips)]
    for dim, members in dims:
        for p, v in members.items():
            if not isinstance(v, list) or not v:
                _bad(invalid + f"{'axes' if dim == p else dim}.{p}: must be a non-empty list")
    sizes = [len(next(iter(m.values()))) for _, m in dims]
    n_points = int(np.prod(sizes, dtype=object)) if sizes else 1
    depths = axes.get("depth")
    max_depth = max(depths) if isinstance(depths, list) and depths else model.get("depth")
    return {"reps": reps, "adaptive_min": adaptive_min, "dims": dims, "depths": depths, "model": model,
            "n_points": n_points, "max_depth": max_depth, "seed": sweep.get("seed"), "name": sweep.get("name")}


def _check_objects(f):
    """Every object reached by hard links only and holding its values in the file."""
    other = f.id.links.visit(lambda name, info: name if info.type != h5py.h5l.TYPE_HARD else None, info=True)
    if other is not None:
        name = "/" + other.decode()
        link = f.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            _bad(f"{name} is an external link to {link.filename}:{link.path}: every object of a store is its own, "
                 "reached by hard links only")
        if isinstance(link, h5py.SoftLink):
            _bad(f"{name} is a soft link to {link.path}: every object of a store is its own, reached by hard links only")
        _bad(f"{name} is a user-defined link: every object of a store is its own, reached by hard links only")
    end = f.id.get_filesize()

    def storage(name, obj):  # h5::storage_outside_file and h5::storage_mismatch
        if not isinstance(obj, h5py.Dataset):
            return None
        if obj.is_virtual or obj.external:
            where = "a virtual dataset (its values are in other datasets)" if obj.is_virtual else \
                f"external storage in {_str(obj.external[0][0])}"
            return f"/{name} keeps its values outside the store ({where})"
        misfit = _storage_misfit(obj, end)
        return f"/{name} does not fit the file: {misfit}" if misfit else None

    problem = f.visititems(storage)
    if problem is not None:
        _bad(problem)


def _storage_misfit(d, end):
    """Why the stored values of dataset `d` do not fit a file whose end is at byte `end`: a
    contiguous block or a chunk that runs past the end or (unfiltered, fixed-size values) holds
    another number of bytes than its values need; None when they fit."""
    type_size = d.id.get_type().get_size()
    fixed = not d.dtype.hasobject
    past_end = lambda addr, size: addr > end or size > end - addr  # noqa: E731
    plist = d.id.get_create_plist()
    if plist.get_layout() == h5py.h5d.CONTIGUOUS:
        addr = d.id.get_offset()
        if addr is None:
            return None
        have, need = d.id.get_storage_size(), type_size * int(np.prod(d.shape, dtype=object))
        if fixed and have != need:
            return f"its values take {have} bytes at byte {addr}, not {need}"
        if past_end(addr, have):
            return f"its values, {have} bytes at byte {addr}, run past the end of the file"
        return None
    if d.chunks is None:
        return None
    if 0 in d.chunks:
        return "a chunk dimension is 0"
    n_chunks = 1
    for size, chunk in zip(d.shape, d.chunks):
        per_dim = -(-size // chunk)
        if per_dim == 0:
            return None  # no values, no chunks
        if per_dim > (1 << 26) // n_chunks:
            return "it has more chunks than a store makes"
        n_chunks *= per_dim
    chunk_bytes = type_size * int(np.prod(d.chunks, dtype=object))
    filtered = plist.get_nfilters() > 0
    allocated = d.id.get_num_chunks()
    # By index (HDF5 1.10 walks the index up to each one: quadratic, but some ns a step), or by
    # coordinates over the grid of chunks (some us each): whichever is faster.
    if allocated * (allocated + 1) // 2 <= 900 * n_chunks:
        infos = sorted((d.id.get_chunk_info(i) for i in range(allocated)), key=lambda c: c.chunk_offset)
    else:
        grid = itertools.product(*(range(0, size, chunk) for size, chunk in zip(d.shape, d.chunks)))
        infos = [c for c in map(d.id.get_chunk_info_by_coord, grid) if c.byte_offset is not None]
    for c in infos:
        at = "(" + ", ".join(str(x) for x in c.chunk_offset) + ")"
        if fixed and not filtered and c.size != chunk_bytes:
            return f"its chunk at {at} takes {c.size} bytes at byte {c.byte_offset}, not {chunk_bytes}"
        if past_end(c.byte_offset, c.size):
            return f"its chunk at {at}, {c.size} bytes at byte {c.byte_offset}, runs past the end of the file"
    return None


def _check_description(f):
    """Root attributes, the stored sweep, /axes and /points (src/store/validate.cpp, same order,
    same reasons)."""
    attrs = {}
    for name, required, most in ROOT_TEXTS:
        if required or name in f.attrs:
            attrs[name] = _attr_text(f, name, most)
    seed = _attr_int(f, "seed", "<u8") if "seed" in f.attrs else None
    reps = _int_in(f, "replicates", 1, MAX_GRID)
    max_depth = _int_in(f, "max_depth", 0, MAX_DEPTH)
    n_points = _int_in(f, "n_points", 1, MAX_GRID)
    n_tasks = _int_in(f, "n_tasks", 1, MAX_GRID * MAX_GRID)
    _int_in(f, "mpi_ranks", 1, INT32_MAX)
    _int_in(f, "threads", 1, INT32_MAX)
    if "blas_threads" in f.attrs:
        _int_in(f, "blas_threads", 1, INT32_MAX)

    sweep = _stored_sweep(attrs)
    if reps != sweep["reps"]:
        _bad(f"attribute 'replicates' = {reps}, but the stored sweep has {sweep['reps']} replicates per point")
    if n_points != sweep["n_points"]:
        _bad(f"attribute 'n_points' = {n_points}, but the stored sweep has {sweep['n_points']} points")
    if n_tasks != sweep["n_points"] * sweep["reps"]:
        _bad(f"attribute 'n_tasks' = {n_tasks}, but the stored sweep has {sweep['n_points'] * sweep['reps']} tasks "
             f"({sweep['n_points']} points x {sweep['reps']} replicates)")
    if sweep["max_depth"] is not None and max_depth != sweep["max_depth"]:
        _bad(f"attribute 'max_depth' = {max_depth}, but the stored sweep has depth {sweep['max_depth']}")
    if seed is not None and sweep["seed"] is not None and seed != sweep["seed"]:
        _bad(f"attribute 'seed' = {seed}, but the stored sweep has seed {sweep['seed']}")
    if "sweep_name" in attrs and sweep["name"] is not None and attrs["sweep_name"] != sweep["name"]:
        _bad("attribute 'sweep_name' is not the stored sweep's name")

    # Attributes of the root are read through no link; every object below it only once its links
    # and storage are checked.
    _check_objects(f)

    # /axes: every axis of the stored sweep, in its order, as the writer stores it.
    axes = []
    for dim, members in sweep["dims"]:
        for p, values in members.items():
            numeric = not any(isinstance(v, str) for v in values)
            kind = "int64" if p in INT_PARAMS and numeric else "float64" if p in FLOAT_PARAMS and numeric else "text"
            axes.append((p, dim, kind, values))
    if isinstance(sweep["depths"], list) and sweep["depths"]:
        axes.append(("depth", "layer", "int64", sweep["depths"]))
    g = f.get("axes", getclass=True)
    if g is None:
        _bad("/axes is missing")
    if g is not h5py.Group:
        _bad("/axes is not a group")
    order = ",".join(a[0] for a in axes)
    if _attr_text(f["axes"], "order", MAX_SHORT_TEXT, "/axes ") != order:
        _bad(f"/axes attribute 'order' does not list the stored sweep's axes ({order})")
    for axis in axes + [("layer", "layer", "int64", list(range(max_depth + 1)))]:
        _check_axis(f, *axis)
    _check_points(f, sweep, axes, n_points, max_depth)
    return {"reps": reps, "n_tasks": n_tasks, "max_depth": max_depth, "adaptive_min": sweep["adaptive_min"]}


def _check_axis(f, name, dim, kind, values):
    path = f"/axes/{name}"
    cls = f["axes"].get(name, getclass=True)
    if cls is None:
        _bad(f"{path} is missing")
    if cls is not h5py.Dataset:
        _bad(f"{path} is not a dataset")
    d = f["axes"][name]
    if d.shape != (len(values),):
        _bad(f"{path} is {_dims_text(d.shape)}, but the stored sweep has {len(values)} values")
    if kind == "int64" and d.dtype != I64 or kind == "float64" and d.dtype != F64 or kind == "text" and (
            h5py.check_string_dtype(d.dtype) is None or h5py.check_string_dtype(d.dtype).length is not None):
        what = {"int64": "an int64", "float64": "a float64", "text": "a variable-length string"}[kind]
        _bad(f"{path} is not {what} dataset")
    if _attr_text(d, "dim", MAX_SHORT_TEXT, f"{path} ") != dim:
        _bad(f"{path} attribute 'dim' is not '{dim}'")
    if kind == "text":
        have = d[...]
        for i, (raw, want) in enumerate(zip(have, values)):
            raw = b"" if raw is None else raw.encode() if isinstance(raw, str) else bytes(raw)
            try:
                text = raw.split(b"\0")[0].decode("utf-8")
            except UnicodeDecodeError:
                _bad(f"{path} value {i} is not valid UTF-8")
            if text != _to_text(want):
                _bad(f"{path} differs from the stored sweep at value {i}")
        return
    have = d[...]
    if kind == "int64":
        want = np.array([int(v) for v in values], dtype=np.int64)
    else:
        want = np.array([float(v) for v in values], dtype=np.float64)
    wrong = np.flatnonzero(~(have == want))
    if wrong.size:
        _bad(f"{path} differs from the stored sweep at value {wrong[0]}")


def _check_points(f, sweep, axes, n_points, max_depth):
    cls = f.get("points", getclass=True)
    if cls is None:
        _bad("/points is missing")
    if cls is not h5py.Dataset:
        _bad("/points is not a dataset")
    d = f["points"]
    if d.dtype.names is None:
        _bad("/points is not a point table (a compound dataset)")
    dim_names = [dim for dim, _ in sweep["dims"]]
    for name in d.dtype.names:
        have = d.dtype.fields[name][0]
        if name in INT_PARAMS or name in FLOAT_PARAMS or name in CHOICE_PARAMS:
            want, what = ((I64, "int64") if name in INT_PARAMS else (F64, "float64") if name in FLOAT_PARAMS
                          else (np.dtype("S16"), "a fixed 16-byte string"))
        elif name.startswith("idx_") and name[4:] in dim_names:
            want, what = I64, "int64"
        else:
            _bad("/points has a field that is neither a model parameter nor idx_<dim> of a grid dimension")
        if have != want:
            _bad(f"/points field '{name}' is not {what}")
    for dim in dim_names:
        if f"idx_{dim}" not in d.dtype.names:
            _bad(f"/points has no 'idx_{dim}' field")
    if d.shape != (n_points,):
        _bad(f"/points is {_dims_text(d.shape)}, but the stored sweep has {n_points} points")
    rows = d[...]
    sizes = [len(next(iter(m.values()))) for _, m in sweep["dims"]]
    index = np.unravel_index(np.arange(n_points), sizes) if sizes else ()
    where = {}  # parameter -> (its values, the grid dimension it moves along)
    for k, (dim, members) in enumerate(sweep["dims"]):
        for p, values in members.items():
            where[p] = (values, k)

    def expected(p):
        """The stored sweep's values of `p` and, per point, which of them (None: the first)."""
        if p == "depth":
            return [max_depth], None
        if p in where:
            values, k = where[p]
            return values, index[k]
        if p in sweep["model"]:
            return [sweep["model"][p]], None
        return None

    def per_point(column, pick):
        return column[pick] if pick is not None else np.broadcast_to(column[0], (n_points,))

    d_source = expected("d")
    d_values = None
    if d_source is not None and all(isinstance(v, int) and not isinstance(v, bool) for v in d_source[0]):
        d_values = per_point(np.array(d_source[0], dtype=np.int64), d_source[1])
    first = None  # (row, field position, message)
    for pos, name in enumerate(d.dtype.names):
        if name.startswith("idx_") and name[4:] in dim_names:
            wrong = np.flatnonzero(rows[name] != index[dim_names.index(name[4:])]) if sizes else np.zeros(0, int)
            message = "{row} is not grid point {row} (" + name + ")"
        else:
            source = expected(name)
            if source is None:
                continue
            values, pick = source
            have = rows[name]
            if name in CHOICE_PARAMS:  # compared as the bytes before the first NUL
                column = np.array([_to_text(v).encode() for v in values] + [b""], dtype=object)[:-1]
                stored = np.array([bytes(h).split(b"\0")[0] for h in have], dtype=object) if len(have) else have
                bad = stored != per_point(column, pick)
            elif name in INT_PARAMS:
                skip = np.array([isinstance(v, str) for v in values])
                column = np.array([0 if isinstance(v, str) else int(v) for v in values], dtype=np.int64)
                bad = (have != per_point(column, pick)) & ~per_point(skip, pick)
            else:
                keyword = np.array([isinstance(v, str) for v in values])
                column = np.array([0.0 if isinstance(v, str) else float(v) for v in values], dtype=np.float64)
                bad = ~(have == per_point(column, pick)) & ~per_point(keyword, pick)
                inv = per_point(np.array([v == "inv_sqrt_d" for v in values]), pick)
                if inv.any() and d_values is not None:  # "inv_sqrt_d" is stored resolved: 1/sqrt(d) of the point
                    with np.errstate(all="ignore"):
                        bad = bad | (inv & ~(have == 1.0 / np.sqrt(d_values.astype(np.float64))))
            wrong = np.flatnonzero(bad)
            message = "{row}: " + name + " differs from the stored sweep's point"
        if wrong.size and (first is None or (wrong[0], pos) < first[:2]):
            first = (wrong[0], pos, message)
    if first is not None:
        _bad("/points row " + first[2].format(row=first[0]))


def _dataset(f, name, dtype, what, shape=None, ndim=None):
    """src/store/store_impl.hpp check_dataset: the shape, then the type."""
    d = f[name]
    if shape is not None and d.shape != shape:
        _bad(f"/{name} is {_dims_text(d.shape)} but must be {_dims_text(shape)}")
    if ndim is not None and d.ndim != ndim:
        _bad(f"/{name} is {_dims_text(d.shape)} but must be {ndim}-dimensional")
    if d.dtype != dtype or d.dtype.names is not None or h5py.check_enum_dtype(d.dtype) is not None:
        _bad(f"/{name} is not {'an' if what[0] == 'i' else 'a'} {what} dataset")


def _require(f, name):
    parts = name.split("/")
    for k in range(1, len(parts) + 1):
        if f.get("/".join(parts[:k]), getclass=True) is None:
            _bad(f"/{'/'.join(parts[:k])} is missing")
    if f.get(name, getclass=True) is not h5py.Dataset:
        _bad(f"/{name} is not a dataset")


def check_store(f, path):
    """Raise StoreInvalid unless the open file `f` is what docs/SCHEMA.md says a store must be,
    checked as `rcsweep info` and `run` check it, in the same order and with the same reason
    (src/store/validate.cpp and open.cpp): its identity (format, schema_version); every object
    reached by hard links only and holding its values in the file; the root attributes (type,
    bounded size); the stored sweep (`config`: its hash is plan_hash, the counts and [sweep.replicates]
    it gives); /axes and /points against it; /tasks (fields, rows, ids, statuses that fit the
    sweep); the result datasets' types and shapes. What this reader cannot check that the engine
    does: the full sweep-file validation of `config`, where HDF5 keeps each dataset's values."""
    try:
        try:
            _check_identity(f, path)
            _check(f)
        except _Refused as r:
            _refuse(path, str(r))
    except StoreInvalid:
        raise
    except (OSError, KeyError, ValueError, TypeError, IndexError, RuntimeError, MemoryError, OverflowError) as e:
        # HDF5 could not read what the checks ask for: damage the checks above do not name.
        _refuse(path, f"{type(e).__name__}: {e}")


def _check_identity(f, path):
    if "format" not in f.attrs:
        raise StoreInvalid(f"{path} is not an rcsweep store (no 'format' attribute)", path)
    try:
        fmt = _attr_text(f, "format", MAX_LONG_TEXT)  # as check_identity reads it
    except _Refused as r:
        _refuse(path, str(r))
    if fmt != "rcsweep":
        raise StoreInvalid(f"{path} is not an rcsweep store (format = '{fmt}')", path)
    if "schema_version" not in f.attrs:
        raise StoreInvalid(f"{path} is not an rcsweep store (no 'schema_version' attribute)", path)
    version = _attr_int(f, "schema_version")
    if version != SCHEMA_VERSION:
        raise StoreInvalid(f"{path}: schema version {version}, this rcsweep reads {SCHEMA_VERSION}", path)


def _check(f):
    layout = _check_description(f)
    n, lmax, reps = layout["n_tasks"], layout["max_depth"], layout["reps"]

    _require(f, "tasks")
    tasks = f["tasks"]
    if tasks.dtype.names is None or "status" not in tasks.dtype.names:
        _bad("/tasks is not a task table (no 'status' field)")
    for field, (dtype, what) in TASK_FIELDS.items():
        if field not in tasks.dtype.names:
            _bad(f"/tasks has no '{field}' field")
        have = tasks.dtype.fields[field][0]
        if field == "status":
            members = h5py.check_enum_dtype(have)
            ok = have == dtype and members and all(STATUS.get(v) == k for k, v in members.items())
        else:
            ok = have == dtype and h5py.check_enum_dtype(have) is None
        if not ok:
            _bad(f"/tasks field '{field}' is not {what}")
    if tasks.ndim != 1 or tasks.shape[0] != n:
        _bad(f"/tasks has {tasks.shape[0] if tasks.ndim else 0} rows, expected {n}")
    columns = tasks.fields(["id", "point", "replicate", "status"])[...] if n else np.zeros(0, tasks.dtype)
    status = columns["status"].astype(np.int8)
    wrong = np.flatnonzero((status < 0) | (status > max(STATUS)))
    if wrong.size:
        _bad(f"task {wrong[0]} has an invalid status (not one of {STATUS_VALUES})")
    ids = np.arange(n, dtype=np.uint64)
    wrong = np.flatnonzero((columns["id"] != ids) | (columns["point"] != ids // np.uint64(reps)) |
                           (columns["replicate"].astype(np.int64) != (ids % np.uint64(reps)).astype(np.int64)))
    if wrong.size:
        _bad(f"/tasks row {wrong[0]}: id, point or replicate is not task {wrong[0]}'s "
             "(id = point x replicates + replicate)")
    not_needed = np.flatnonzero(status == NOT_NEEDED)
    if not_needed.size:
        low_min = layout["adaptive_min"]
        if low_min is None:
            _bad(f"task {not_needed[0]} is not_needed, but its sweep has no adaptive replicates ([sweep.replicates])")
        low = not_needed[not_needed % reps < low_min]
        if low.size:
            _bad(f"task {low[0]} is not_needed, but its replicate {low[0] % reps} is below the adaptive rule's "
                 f"min = {low_min}, which always runs")

    core = core_metrics()
    for m in LAYER_METRICS + LATER_METRICS:  # the core metrics' datasets, a later one's where the store has it
        if m in core or ("layers" in f and f["layers"].get(m, getclass=True) is not None):
            _require(f, f"layers/{m}")
            _dataset(f, f"layers/{m}", F64, "float64", (n, lmax + 1))
    if "theory" in f:
        for q in THEORY_FLOATS:
            if q in f["theory"]:
                _dataset(f, f"theory/{q}", F64, "float64", (n,))
    if "grad" in f:
        for q in ("log10_g", "stderr"):
            if q in f["grad"]:
                _dataset(f, f"grad/{q}", F64, "float64", (n, lmax))
        for q in ("log10_g_all", "stderr_all"):
            if q in f["grad"]:
                _dataset(f, f"grad/{q}", F64, "float64", (n, lmax, lmax))
    if "spectra" in f:
        for q in ("x_sv", "m_sv", "m_eig_re", "m_eig_im"):
            if q in f["spectra"]:
                _dataset(f, f"spectra/{q}", F64, "float64", ndim=1)
        for q in ("x_sv_offset", "m_offset"):
            if q in f["spectra"]:
                _dataset(f, f"spectra/{q}", I64, "int64", (n, lmax + 1))
        for q in ("x_sv_length", "m_length"):
            if q in f["spectra"]:
                _dataset(f, f"spectra/{q}", I64, "int64", (n,))
    if "provenance" in f and "platform" in f["provenance"]:
        _dataset(f, "provenance/platform", np.dtype("<i2"), "int16", (n,))


def _str(a):
    return a.decode() if isinstance(a, bytes) else a


def _axis_values(dset):
    if h5py.check_string_dtype(dset.dtype) is not None:
        return np.array(dset.asstr()[...], dtype=object).astype(str)
    return dset[...]


def _grid(f):
    """[(dim, {param: values})] in grid order, and the replicates count."""
    order = [p for p in _str(f["axes"].attrs.get("order", "")).split(",") if p]
    dims = []
    for p in order:
        dset = f["axes"][p]
        dim = _str(dset.attrs["dim"])
        if dim == "layer":  # a swept depth list: not a grid dimension
            continue
        if not dims or dims[-1][0] != dim:
            dims.append((dim, {}))
        dims[-1][1][p] = _axis_values(dset)
    return dims


ROOT_NAMES = ("format", "schema_version", *(name for name, _, _ in ROOT_TEXTS), "seed", "replicates", "max_depth",
              "n_points", "n_tasks", "mpi_ranks", "threads", "blas_threads")


def _soft_text(obj, name):
    """An attribute that only labels (a description, what was stored): its text, or None when it is
    missing or not a short UTF-8 string."""
    try:
        return _attr_text(obj, name, MAX_SHORT_TEXT) if name in obj.attrs else None
    except Exception:  # noqa: BLE001 - a label that cannot be read is left out
        return None


def _soft_int(obj, name):
    try:
        return _attr_int(obj, name) if name in obj.attrs else None
    except Exception:  # noqa: BLE001
        return None


def _attrs(name, description=None, units=None):
    long_name, symbol, units = METRICS.get(name, (_str(description) if description else name, name, units or "1"))
    a = {"long_name": long_name, "symbol": symbol, "units": units}
    if description:
        a["description"] = _str(description)
    return a


def task_statuses(f):
    """code -> name of the task statuses of an open store: the members of its /tasks status
    enumeration (check_store made sure they are among STATUS's), STATUS where it has none."""
    try:
        members = h5py.check_enum_dtype(f["tasks"].dtype.fields["status"][0])
    except (KeyError, TypeError):
        members = None
    if not members:
        return dict(STATUS)
    return {int(code): name for name, code in sorted(members.items(), key=lambda m: m[1])}


def status_label(statuses):
    """"task status: 0 pending, 1 done, ..." for code -> name `statuses` (task_statuses)."""
    return "task status: " + ", ".join(f"{c} {n.replace('_', ' ')}" for c, n in statuses.items())


# The order outcomes other than done are named in (outcome_words): the one an adaptive rule
# chose first, then the stack's outcomes, then what went wrong or is still to run.
OUTCOME_ORDER = ("not_needed", "diverged", "vanished", "failed", "pending")
NO_VALUE = "no_value"  # a replicate without a value whose status is done or unknown (outcome_words)


def outcome_words(counts, numbers=True, last=", "):
    """The words for the outcomes of some tasks or replicates, each by the store's own name
    (STATUS, "_" read as " "): {"not_needed": 20} -> "20 not needed", {"diverged": 3, "failed": 1}
    -> "3 diverged, 1 failed"; numbers=False names them only, `last` joining the last two
    ("diverged or vanished"). Names follow OUTCOME_ORDER, then any other; zero counts and "done"
    are left out; NO_VALUE (a done task without a value there, or no status known) reads "N
    without a value". The one place where rcsweep-plot's legends, titles and markers,
    rcsweep-summary and the report put outcomes into words."""
    order = {n: k for k, n in enumerate(OUTCOME_ORDER)}
    items = sorted(((n, c) for n, c in counts.items() if n not in ("done", None) and (not isinstance(c, (int, np.integer)) or c)),
                   key=lambda nc: (order.get(nc[0], len(order)), str(nc[0])))
    if None in counts and (not isinstance(counts[None], (int, np.integer)) or counts[None]):
        items.append((NO_VALUE, counts[None]))
    words = []
    for n, c in items:
        name = "without a value" if n == NO_VALUE else str(n).replace("_", " ")
        words.append(f"{c} {name}" if numbers else name)
    if len(words) > 1 and last != ", ":
        return ", ".join(words[:-1]) + last + words[-1]
    return ", ".join(words)


def outcome_counts(status, statuses=None):
    """{name: count} of the task statuses `status` (codes; `statuses` code -> name, STATUS by
    default), every status present, done included."""
    names = statuses or STATUS
    codes, k = np.unique(np.asarray(status).ravel(), return_counts=True)
    return {names.get(int(c), str(int(c))): int(n) for c, n in zip(codes, k)}


def layer_metrics(f):
    """The per-layer metrics of an open store, in storage order: LAYER_METRICS (the core metrics,
    which check_store requires; with fewer core metrics for a test, core_metrics(), those after them
    that the store holds), LATER_METRICS that the store holds, then every other float64 dataset of /layers with a row per task and a
    column per layer, a metric this toolkit does not know (docs/SCHEMA.md "Adding a metric"): those
    the `computed` attribute lists in its order, then the rest by name. Only what the store holds:
    a metric it lacks (made before the metric) is not listed. Anything else there is not read."""
    n, l1 = int(f.attrs["n_tasks"]), int(f.attrs["max_depth"]) + 1
    computed = (_soft_text(f["layers"], "computed") or "").split()

    def fits(name):
        try:
            d = f["layers"].get(name)
            return isinstance(d, h5py.Dataset) and d.dtype == F64 and d.shape == (n, l1)
        except (KeyError, TypeError, ValueError, OSError):
            return False

    core = core_metrics()
    extra = sorted((m for m in f["layers"] if m not in LAYER_METRICS + LATER_METRICS and fits(m)),
                   key=lambda m: (computed.index(m) if m in computed else len(computed), m))
    return core + tuple(m for m in (LAYER_METRICS + LATER_METRICS)[len(core):] if fits(m)) + tuple(extra)


def load(path):
    """The store at `path` as an xarray.Dataset (see the module docstring). Raises StoreInvalid
    (a ValueError) for a file that is not a valid store (open_store), FileNotFoundError for a
    missing one."""
    try:
        return _load(path)
    except (StoreInvalid, MemoryError):
        raise
    except (OSError, KeyError, IndexError, ValueError, TypeError, UnicodeDecodeError) as e:
        if isinstance(e, FileNotFoundError) and not os.path.exists(os.fspath(path)):
            raise
        # Something check_store does not look at could not be read: still a refusal, never a raw error.
        _refuse(os.fspath(path), f"{type(e).__name__}: {e}")


def _load(path):
    import xarray as xr

    with open_store(path) as f:
        reps = int(f.attrs["replicates"])
        lmax = int(f.attrs["max_depth"])
        n_tasks = int(f.attrs["n_tasks"])
        grid = _grid(f)
        gdims = [g[0] for g in grid]
        gshape = [len(next(iter(m.values()))) for _, m in grid]
        points = f["points"][...]
        tasks = f["tasks"][...]
        # check_store (open_store) made sure /axes, /points and /tasks are the stored sweep's: the
        # grid's shape, points in row-major grid order, tasks in id order.
        tdims = gdims + ["replicate"]
        tshape = gshape + [reps]
        status = tasks["status"].astype(np.int8)
        # pending (maybe partial rows), failed, not needed (never run) or a status this reader does
        # not know: no rows. Done, diverged and vanished tasks keep theirs (the last two up to the
        # last layer they reached).
        masked = (status != DONE) & (status != DIVERGED) & (status != VANISHED)

        def per_task(a):
            a = np.array(a, dtype=np.float64)
            a[masked] = np.nan
            return a.reshape(tshape + list(a.shape[1:]))

        coords = {"replicate": np.arange(reps), "layer": f["axes/layer"][...]}
        for dim, members in grid:
            if len(members) == 1 and dim in members:
                coords[dim] = members[dim]
            else:
                coords[dim] = np.arange(len(next(iter(members.values()))))
                for p, v in members.items():
                    coords[p] = (dim, v)
        # every /points parameter not already a coordinate
        for name in points.dtype.names:
            if name.startswith("idx_"):
                continue
            v = points[name]
            if v.dtype.kind == "S":
                v = np.char.decode(v).astype(str)
            cname = name
            if name in coords:
                if np.asarray(coords[name] if not isinstance(coords[name], tuple) else coords[name][1]).dtype.kind != "U":
                    continue
                if v.dtype.kind == "U":
                    continue
                cname = f"{name}_value"  # a string scale axis ("inv_sqrt_d"): its resolved numbers
            if np.all(v == v[0]):
                coords[cname] = v[0]
                continue
            # over the grid dimensions it varies along (e.g. sigma_qk = "inv_sqrt_d" on d's dimension)
            a, keep = v.reshape(gshape), []
            for k, dim in enumerate(gdims):
                first = np.take(a, [0], axis=k)
                if np.all(a == first):
                    a = first
                else:
                    keep.append(k)
            a = a.reshape([gshape[k] for k in keep])
            coords[cname] = ([gdims[k] for k in keep], a)

        data = {}
        for m in layer_metrics(f):  # schema 2's, then any other metric the store holds
            d = f["layers"][m]
            data[m] = (tdims + ["layer"], per_task(d[...]),
                       _attrs(m, _soft_text(d, "description"), _soft_text(d, "units")))
        if "theory" in f:
            for q in f["theory"]:
                data[f"theory_{q}"] = (tdims, per_task(f["theory"][q][...]),
                                       _attrs(f"theory_{q}", _soft_text(f["theory"][q], "description")))
        if "grad" in f:
            for q in ("log10_g", "stderr"):
                if q in f["grad"]:
                    a = np.full((n_tasks, lmax + 1), np.nan)
                    a[:, 1:] = f["grad"][q][...]
                    data[f"grad_{q}"] = (tdims + ["layer"], per_task(a), _attrs(f"grad_{q}", _soft_text(f["grad"][q], "description")))
                if f"{q}_all" in f["grad"]:
                    a = np.full((n_tasks, lmax, lmax + 1), np.nan)
                    a[:, :, 1:] = f["grad"][f"{q}_all"][...]
                    data[f"grad_{q}_all"] = (tdims + ["L", "layer"], per_task(a),
                                             _attrs(f"grad_{q}_all", _soft_text(f["grad"][f"{q}_all"], "description")))
                    coords["L"] = np.arange(1, lmax + 1)
        data["status"] = (tdims, status.reshape(tshape), {**_attrs("status"), "long_name": status_label(task_statuses(f))})
        data["task"] = (tdims, tasks["id"].astype(np.int64).reshape(tshape), _attrs("task"))
        data["wall_s"] = (tdims, tasks["wall_s"].reshape(tshape), _attrs("wall_s"))
        data["rank"] = (tdims, tasks["rank"].reshape(tshape), _attrs("rank"))
        data["message"] = (tdims, np.char.decode(tasks["message"], "utf-8", "replace").astype(str).reshape(tshape), _attrs("message"))

        # the root attributes check_store read (an attribute added beside them is not read)
        attrs = {k: (v.item() if isinstance(v, np.generic) else _str(v)) for k, v in f.attrs.items() if k in ROOT_NAMES}
        attrs["path"] = os.path.abspath(os.fspath(path))
        if "depth" in f["axes"]:
            attrs["requested_depths"] = [int(x) for x in f["axes/depth"][...]]
        if "spectra" in f:
            attrs["spectra_stored"] = _soft_text(f["spectra"], "stored") or "none"
            attrs["mixer_spectra_stored"] = _soft_text(f["spectra"], "mixer_stored") or "none"
        if "grad" in f:
            for k in ("stored", "method", "probes"):
                attrs[f"grad_{k}"] = _soft_int(f["grad"], k) if k == "probes" else _soft_text(f["grad"], k)

    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for c in ds.coords:
        if c in PARAMS:
            ds[c].attrs.update(long_name=PARAMS[c][0], symbol=PARAMS[c][1])
    return ds


def spectrum(src, name, layer, **sel):
    """One stored spectrum: `name` is "x_sv" (singular values of X_l/||X_l||_F, descending),
    "m_sv" (singular values of head 0's mixer M_l) or "m_eig" (eigenvalues of M_l, complex).

    `src`: a Dataset from load() or a store path. `sel`: coordinates that pick the tasks, e.g.
    spectrum(ds, "m_eig", layer=1, gap_fix="none", zip0=2), or task=<id>. Returns a numpy array of
    shape (selected tasks..., length) — the dimensions left unselected stay, in Dataset order —
    with NaN rows where nothing is stored (layer not stored, task not done). Raises KeyError when
    the store has no such spectra and ValueError when the selected tasks' lengths differ."""
    if name not in SPECTRA:
        raise KeyError(f"unknown spectrum {name!r}; one of {', '.join(SPECTRA)}")
    ds = src if not isinstance(src, (str, os.PathLike)) else load(src)
    if "task" in sel:
        ids = np.asarray(sel.pop("task"), dtype=np.int64)
        if sel:
            raise ValueError("give either task= or coordinates, not both")
    else:
        ids = np.asarray(ds["task"].sel(**sel).values, dtype=np.int64)
    shape = ids.shape
    ids = ids.ravel()
    values, off_name, len_name, stored_attr = SPECTRA[name]
    with open_store(ds.attrs["path"]) as f:
        if "spectra" not in f or off_name not in f["spectra"] or (_soft_text(f["spectra"], stored_attr) or "none") == "none":
            which = "[output] spectra" if name == "x_sv" else "[output] mixer_spectra"
            raise KeyError(f"{ds.attrs['path']}: no {name} spectra stored (the sweep needs {which} = \"last\" or \"all\")")
        g = f["spectra"]
        layer = int(layer)
        lengths = g[len_name][...][ids]
        if len(set(lengths.tolist())) > 1:
            raise ValueError(f"the selected tasks' {name} spectra have different lengths {sorted(set(lengths.tolist()))}; select fewer")
        n = int(lengths[0]) if len(lengths) else 0
        offs = g[off_name][:, layer][ids]
        status = f["tasks"]["status"][ids]
        out = np.full((len(ids), n), np.nan, dtype=complex if name == "m_eig" else float)
        for k, (o, st) in enumerate(zip(offs, status)):
            if o < 0 or st not in (DONE, DIVERGED):
                continue
            v = g[values[0]][o:o + n]
            if name == "m_eig":
                v = v + 1j * g[values[1]][o:o + n]
            out[k] = v
    return out.reshape(shape + (n,))


def tidy(path, by="task"):
    """by="task" (default): one row per (task, layer): task, point, replicate, status, the grid
    coordinates (every swept parameter, zip members included), layer, the /layers metrics, the per-task
    /theory quantities and, when stored, grad_log10_g / grad_stderr (NaN at layer 0). Masked like
    load().

    by="point": one row per (grid point, layer) from replicate_stats(): point, the grid coordinates,
    layer, `n_done` and the other status counts, and for every metric `<m>` (mean over the done
    replicates), `<m>_se` (its standard error, NaN when fewer than 2) and `<m>_n` (how many done
    replicates have a value at that layer); per-task quantities (theory_*) repeat over layers."""
    if by == "point":
        return _tidy_points(path)
    if by != "task":
        raise ValueError(f"tidy: by must be 'task' or 'point', got {by!r}")
    import pandas as pd

    ds = load(path)
    tdims = list(ds["status"].dims)
    cols = {}
    flat = {v: ds[v].transpose(*tdims).values.ravel() for v in ("task", "status")}
    n_t = flat["task"].size
    nl = ds.sizes["layer"]
    order = np.argsort(flat["task"], kind="stable")
    rep = lambda a: np.repeat(np.asarray(a).ravel()[order], nl)  # noqa: E731
    cols["task"] = rep(flat["task"])
    cols["point"] = cols["task"] // int(ds.attrs["replicates"])
    for c in tdims:
        cols[c] = rep(ds[c].broadcast_like(ds["status"]).transpose(*tdims).values)
    for c, v in ds.coords.items():
        if c in cols or c in ("layer", "L") or v.ndim == 0:
            continue
        if set(v.dims) <= set(tdims):
            cols[c] = rep(v.broadcast_like(ds["status"]).transpose(*tdims).values)
    cols["status"] = rep(flat["status"])
    cols["layer"] = np.tile(ds["layer"].values, n_t)
    for v in ds.data_vars:
        dims = ds[v].dims
        if dims == tuple(tdims) + ("layer",):
            cols[v] = ds[v].transpose(*tdims, "layer").values.reshape(n_t, nl)[order].ravel()
        elif dims == tuple(tdims) and v.startswith("theory_"):
            cols[v] = rep(ds[v].transpose(*tdims).values)
    return pd.DataFrame(cols)


def mean_se(da, dim="replicate"):
    """(mean, se, n) of the DataArray `da` over `dim`, NaN left out: n the number of values, the mean
    over them, se = sd / sqrt(n) with the sample sd (ddof = 1); mean NaN where n = 0, se NaN where
    n < 2. Shared by replicate_stats() and the figures' bands (plot.mean_band)."""
    import warnings

    n = da.count(dim)
    with warnings.catch_warnings():  # no value, or one: NaN by design
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = da.mean(dim, skipna=True)
        se = (da.std(dim, ddof=1, skipna=True) / np.sqrt(n)).where(n >= 2)
    return mean, se, n


def _stat_vars(ds, dim):
    """The float data variables that vary over `dim`: the metrics, theory_*, grad_*, wall_s."""
    skip = {"status", "task", "rank", "message"}
    return [v for v in ds.data_vars if v not in skip and dim in ds[v].dims and ds[v].dtype.kind == "f"]


def replicate_stats(src, metrics=None):
    """Per grid point (and layer) statistics over the **done** replicates of a store or of a loaded
    Dataset `src`: every status other than done (pending, failed, diverged, not_needed) contributes
    nothing, so points may rest on different numbers of replicates (adaptive replicates).

    Returns an xarray.Dataset with the grid dimensions (and layer, L where the metric has them),
    the store's coordinates and attributes, and for each metric m (default: every float variable
    over replicates, i.e. the /layers metrics, theory_*, grad_*, wall_s; or the names in `metrics`):
      m          mean over the done replicates that have a value (NaN when none)
      m_se       its standard error, sd / sqrt(n) with the sample sd (ddof = 1); NaN when n < 2
      m_n        n, the number of done replicates with a finite value (int)
    and per grid point `n_done`, `n_pending`, `n_failed`, `n_diverged`, `n_not_needed` (counts of
    the replicates in each status)."""
    import xarray as xr

    ds = src if isinstance(src, xr.Dataset) else load(src)
    names = _stat_vars(ds, "replicate") if metrics is None else list(metrics)
    for m in names:
        if m not in ds.data_vars or "replicate" not in ds[m].dims:
            raise KeyError(f"replicate_stats: no per-replicate variable {m!r}; choose from "
                           f"{', '.join(_stat_vars(ds, 'replicate'))}")
    done = ds["status"] == DONE
    out = {}
    for m in names:
        mean, se, n = mean_se(ds[m].where(done), "replicate")
        a = dict(ds[m].attrs)
        out[m] = mean.assign_attrs({**a, "statistic": "mean over done replicates"})
        out[f"{m}_se"] = se.assign_attrs({**a, "long_name": f"standard error of the mean of {m}",
                                          "statistic": "sd (ddof=1) / sqrt(n) over done replicates"})
        out[f"{m}_n"] = n.astype(np.int64).assign_attrs(long_name=f"done replicates with a value of {m}",
                                                       units="1")
    for code, name in STATUS.items():
        out[f"n_{name}"] = (ds["status"] == code).sum("replicate").astype(np.int64).assign_attrs(
            long_name=f"replicates {name}", units="1")
    res = xr.Dataset(out, attrs=dict(ds.attrs))
    return res.drop_vars([c for c in ("replicate",) if c in res.coords])


def _tidy_points(path):
    import pandas as pd

    ds = load(path)
    st = replicate_stats(ds, [m for m in _stat_vars(ds, "replicate") if "L" not in ds[m].dims])
    gdims = [d for d in ds["status"].dims if d != "replicate"]
    shape = [ds.sizes[d] for d in gdims]
    n_p = int(np.prod(shape)) if gdims else 1
    nl = ds.sizes["layer"]
    rep = lambda a: np.repeat(np.asarray(a).reshape(n_p), nl)  # noqa: E731
    template = ds["status"].isel(replicate=0, drop=True)
    cols = {"point": rep(np.arange(n_p))}
    for c in gdims:
        cols[c] = rep(ds[c].broadcast_like(template).transpose(*gdims).values)
    for c, v in ds.coords.items():
        if c in cols or c in ("layer", "L", "replicate") or v.ndim == 0:
            continue
        if set(v.dims) <= set(gdims):
            cols[c] = rep(v.broadcast_like(template).transpose(*gdims).values)
    cols["layer"] = np.tile(ds["layer"].values, n_p)
    for code, name in STATUS.items():
        cols[f"n_{name}"] = rep(st[f"n_{name}"].transpose(*gdims).values)
    for v in st.data_vars:
        if v.startswith("n_") and v[2:] in STATUS.values():
            continue
        dims = st[v].dims
        if "layer" in dims:
            cols[v] = st[v].transpose(*gdims, "layer").values.reshape(n_p * nl)
        else:
            cols[v] = rep(st[v].transpose(*gdims).values)
    return pd.DataFrame(cols)
