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
  - the 13 `/layers` metrics, dims (grid..., replicate, layer);
  - `/theory/<q>` as `theory_<q>`, dims (grid..., replicate);
  - `/grad` (when stored): `grad_log10_g`, `grad_stderr` on (grid..., replicate, layer) with layer 0
    NaN (the gradient of layer l = 1..L_max sits at layer l), and with gradients = "all"
    `grad_log10_g_all`, `grad_stderr_all` on (grid..., replicate, L, layer): L = 1..L_max is the
    output depth;
  - `status` (int8, 0 pending 1 done 2 failed 3 diverged 4 not_needed 5 vanished), `task` (the task id, = row of /tasks),
    `wall_s`, `rank`, `message` (str), dims (grid..., replicate).
Coordinates besides the dimensions: every `/points` parameter that is not a dimension coordinate,
as a scalar when it is the same at every point, else over the grid dimensions (a swept scale axis
written as a string, e.g. skip_scale = [1.0, "inv_sqrt_d"], also gets `<name>_value`, the resolved
number). `depth` is L_max; a swept `depth` list is in attrs["requested_depths"].
Attributes: every root attribute of the store (config, plan_hash, git_commit, ...) plus `path`;
each variable has `long_name`, `symbol` (matplotlib mathtext), `units` ("1" = dimensionless) and
the store's `description`.

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

import os

import h5py
import numpy as np

STATUS = {0: "pending", 1: "done", 2: "failed", 3: "diverged", 4: "not_needed", 5: "vanished"}
DONE, DIVERGED, NOT_NEEDED, VANISHED = 1, 3, 4, 5
# The metrics of every task (dims grid..., replicate, layer); replicate_stats summarises these.
LAYER_METRICS = ("fro", "log_fro", "s1", "s2", "sr_cov", "sr_x", "mu", "mu_rel", "res_rel", "m_s1",
                 "m_s2", "m_gap", "m_fro")

# name -> (long name, mathtext symbol, units). "1": dimensionless; "X" : in units of the input X_0.
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
    "status": ("task status: 0 pending, 1 done, 2 failed, 3 diverged, 4 not needed, 5 vanished", "status", "1"),
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
    "sr_cov": (1, None), "sr_x": (1, None), "mu_rel": (0, 1), "res_rel": (0, None),
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


def open_store(path):
    """h5py.File read-only, HDF5 file locking off (readable while rcsweep writes it); checks it is a
    store of the schema (check_store)."""
    path = os.fspath(path)
    try:
        f = h5py.File(path, "r", locking=False)
    except TypeError:  # h5py < 3.5
        os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")
        f = h5py.File(path, "r")
    try:
        if f.attrs.get("format") != "rcsweep":
            raise ValueError(f"{path}: not an rcsweep store (no root attribute format = 'rcsweep')")
        check_store(f, path)
    except BaseException:
        f.close()
        raise
    return f


F64, I64 = np.dtype("<f8"), np.dtype("<i8")
# /tasks fields (docs/SCHEMA.md "/tasks"): status is an int8 HDF5 enumeration of the statuses.
TASK_FIELDS = {"id": np.dtype("<u8"), "point": np.dtype("<u8"), "replicate": np.dtype("<i4"),
               "status": np.dtype("i1"), "wall_s": F64, "rank": np.dtype("<i4"), "message": np.dtype("S256")}


def check_store(f, path):
    """Raise ValueError unless the open store `f` is what docs/SCHEMA.md says, as `rcsweep info`
    and `run` check it: every object reached by hard links only (no soft or external link) and
    holding its values in the file, /tasks with its documented fields and types, float64 (little-
    endian) /layers, /theory, /grad and spectrum values of their shapes, int64 spectrum offsets,
    an int16 /provenance/platform, and statuses that fit the sweep (not_needed only with adaptive
    replicates, from their min)."""
    def bad(why):
        raise ValueError(f"{path}: not a valid rcsweep store: {why}")

    other = f.id.links.visit(lambda name, info: name if info.type != h5py.h5l.TYPE_HARD else None, info=True)
    if other is not None:
        name = "/" + other.decode()
        link = f.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            bad(f"{name} is an external link to {link.filename}:{link.path}: every object of a store is its own, "
                "reached by hard links only")
        if isinstance(link, h5py.SoftLink):
            bad(f"{name} is a soft link to {link.path}: every object of a store is its own, reached by hard links only")
        bad(f"{name} is a user-defined link: every object of a store is its own, reached by hard links only")
    outside = []
    f.visititems(lambda name, obj: outside.append(name) if isinstance(obj, h5py.Dataset) and (
        obj.is_virtual or obj.external) else None)
    if outside:
        bad(f"/{outside[0]} keeps its values outside the store")

    n, lmax = int(f.attrs["n_tasks"]), int(f.attrs["max_depth"])
    reps = max(int(f.attrs.get("replicates", 1)), 1)

    def dataset(name, dtype, shape=None, ndim=None):
        d = f.get(name)
        if not isinstance(d, h5py.Dataset):
            bad(f"/{name} is missing")
        if d.dtype != dtype:
            bad(f"/{name} is {d.dtype}, not {dtype}")
        if shape is not None and d.shape != shape:
            bad(f"/{name} has shape {d.shape}, not {shape}")
        if ndim is not None and d.ndim != ndim:
            bad(f"/{name} has {d.ndim} dimensions, not {ndim}")
        return d

    tasks = f.get("tasks")
    if not isinstance(tasks, h5py.Dataset) or tasks.dtype.names is None:
        bad("/tasks is not a task table")
    for field, dtype in TASK_FIELDS.items():
        if field not in tasks.dtype.names:
            bad(f"/tasks has no '{field}' field")
        have = tasks.dtype.fields[field][0]
        if have != dtype or (field == "status" and not h5py.check_enum_dtype(have)):
            bad(f"/tasks field '{field}' is {have}, not {dtype}{' (an enumeration)' if field == 'status' else ''}")
    if tasks.shape != (n,):
        bad(f"/tasks has shape {tasks.shape}, not ({n},)")
    for m in LAYER_METRICS:
        dataset(f"layers/{m}", F64, (n, lmax + 1))
    for q in f.get("theory", {}):
        dataset(f"theory/{q}", F64, (n,))
    for q in f.get("grad", {}):
        dataset(f"grad/{q}", F64, (n, lmax) if q in ("log10_g", "stderr") else (n, lmax, lmax))
    for q in f.get("spectra", {}):
        if q.endswith("_offset"):
            dataset(f"spectra/{q}", I64, (n, lmax + 1))
        elif q.endswith("_length"):
            dataset(f"spectra/{q}", I64, (n,))
        else:
            dataset(f"spectra/{q}", F64, ndim=1)
    if "provenance/platform" in f:
        dataset("provenance/platform", np.dtype("<i2"), (n,))

    status = tasks.fields("status")[...].astype(np.int8) if n else np.zeros(0, np.int8)
    wrong = np.flatnonzero((status < 0) | (status > max(STATUS)))
    if wrong.size:
        bad(f"task {wrong[0]} has an invalid status {status[wrong[0]]}")
    not_needed = np.flatnonzero(status == NOT_NEEDED)
    if not_needed.size:
        config = _str(f.attrs.get("config", ""))
        lines = config.split("\n")
        if "[sweep.replicates]" not in lines:
            bad(f"task {not_needed[0]} is not_needed, but its sweep has no adaptive replicates ([sweep.replicates])")
        rule = lines[lines.index("[sweep.replicates]") + 1:]
        mins = [int(line.split("=")[1]) for line in rule[:next((i for i, x in enumerate(rule) if x.startswith("[")),
                                                                len(rule))] if line.startswith("min =")]
        low = not_needed[not_needed % reps < (mins[0] if mins else 0)]
        if low.size:
            bad(f"task {low[0]} is not_needed, but its replicate {low[0] % reps} is below the adaptive rule's "
                f"min = {mins[0]}, which always runs")


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


def _attrs(name, description=None):
    long_name, symbol, units = METRICS.get(name, (name, name, "1"))
    a = {"long_name": long_name, "symbol": symbol, "units": units}
    if description:
        a["description"] = _str(description)
    return a


def load(path):
    """The store at `path` as an xarray.Dataset (see the module docstring)."""
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
        if int(np.prod(gshape)) != len(points) or len(points) * reps != n_tasks:
            raise ValueError(f"{path}: /axes ({gshape}) do not match {len(points)} points x {reps} replicates")
        # Points are row-major over the grid dimensions: check against the idx_<dim> columns.
        idx = np.stack(np.unravel_index(np.arange(len(points)), gshape), axis=1) if gdims else None
        for k, dim in enumerate(gdims):
            if not np.array_equal(points[f"idx_{dim}"], idx[:, k]):
                raise ValueError(f"{path}: /points.idx_{dim} is not in row-major grid order")
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
        for m in f["layers"]:
            data[m] = (tdims + ["layer"], per_task(f["layers"][m][...]), _attrs(m, f["layers"][m].attrs.get("description")))
        if "theory" in f:
            for q in f["theory"]:
                data[f"theory_{q}"] = (tdims, per_task(f["theory"][q][...]),
                                       _attrs(f"theory_{q}", f["theory"][q].attrs.get("description")))
        if "grad" in f:
            for q in ("log10_g", "stderr"):
                if q in f["grad"]:
                    a = np.full((n_tasks, lmax + 1), np.nan)
                    a[:, 1:] = f["grad"][q][...]
                    data[f"grad_{q}"] = (tdims + ["layer"], per_task(a), _attrs(f"grad_{q}", f["grad"][q].attrs.get("description")))
                if f"{q}_all" in f["grad"]:
                    a = np.full((n_tasks, lmax, lmax + 1), np.nan)
                    a[:, :, 1:] = f["grad"][f"{q}_all"][...]
                    data[f"grad_{q}_all"] = (tdims + ["L", "layer"], per_task(a),
                                             _attrs(f"grad_{q}_all", f["grad"][f"{q}_all"].attrs.get("description")))
                    coords["L"] = np.arange(1, lmax + 1)
        data["status"] = (tdims, status.reshape(tshape), _attrs("status"))
        data["task"] = (tdims, tasks["id"].astype(np.int64).reshape(tshape), _attrs("task"))
        data["wall_s"] = (tdims, tasks["wall_s"].reshape(tshape), _attrs("wall_s"))
        data["rank"] = (tdims, tasks["rank"].reshape(tshape), _attrs("rank"))
        data["message"] = (tdims, np.char.decode(tasks["message"]).astype(str).reshape(tshape), _attrs("message"))

        attrs = {k: (v.item() if isinstance(v, np.generic) else _str(v)) for k, v in f.attrs.items()}
        attrs["path"] = os.path.abspath(os.fspath(path))
        if "depth" in f["axes"]:
            attrs["requested_depths"] = [int(x) for x in f["axes/depth"][...]]
        if "spectra" in f:
            attrs["spectra_stored"] = _str(f["spectra"].attrs.get("stored", "none"))
            attrs["mixer_spectra_stored"] = _str(f["spectra"].attrs.get("mixer_stored", "none"))
        if "grad" in f:
            for k in ("stored", "method", "probes"):
                v = f["grad"].attrs.get(k)
                attrs[f"grad_{k}"] = v.item() if isinstance(v, np.generic) else _str(v)

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
        if "spectra" not in f or off_name not in f["spectra"] or _str(f["spectra"].attrs.get(stored_attr, "none")) == "none":
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
    coordinates (every swept parameter, zip members included), layer, the 13 metrics, the per-task
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
    over replicates, i.e. the 13 metrics, theory_*, grad_*, wall_s; or the names in `metrics`):
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
