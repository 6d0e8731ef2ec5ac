"""Every store under some folders, as a table: which sweep, which parameters, how far, made by what.

    rcsweep ls [DIR|STORE ...] [--where KEY=VALUE ...] [--json]      (or rcsweep-ls ...)
    catalog(paths, where=None)  -> pandas.DataFrame                    (Python)

A lab accumulates stores; this lists each one found under the folders (every `*.h5` and `*.hdf5`
file, folders searched recursively, symbolic links to folders not followed): its sweep name and
plan hash, the swept axes with their values, the fixed model parameters, how many tasks are done,
pending, not needed, failed, diverged and vanished, the rcsweep version and commit that made it,
when, on which host, and its size on disk.

It reads only what a store says about itself (the root attributes, the stored sweep `config`, the
/tasks status column and the /provenance hosts), never the results, so it is quick on hundreds of
stores. A store being written is read as it stands (HDF5 file locking off, as `rcsweep info` does;
what a run has flushed). A file that is not what docs/SCHEMA.md says is refused by name with the
line every reader gives (`PATH: damaged rcsweep store (REASON)`) and the listing goes on; an HDF5
file that is not an rcsweep store at all (no `format = "rcsweep"` attribute) is left out. The
checks are those of the attributes and columns it reads; `rcsweep info STORE` makes every check.

`--where KEY=VALUE` keeps the stores whose parameter KEY has the value VALUE: fixed at it, or with
it among the values of a swept axis (numbers compare as numbers: `lambda=0.5` matches 0.50);
`KEY=A,B` matches either value; several conditions must all hold. KEY may also be `sweep`, `host`,
`version`, `plan_hash` or `git_commit`. A KEY that no listed store knows is an error.
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import h5py
import numpy as np

from . import load as _load

SUFFIXES = (".h5", ".hdf5")
COLUMNS = ("path", "sweep", "plan_hash", "axes", "fixed", "n_tasks", "done", "pending", "not_needed", "failed",
           "diverged", "vanished", "finished", "version", "git_commit", "created", "host", "hosts", "size_bytes",
           "refused")
COUNTS = ("done", "pending", "not_needed", "failed", "diverged", "vanished")
WHERE_COLUMNS = {"sweep": "sweep", "host": "host", "version": "version", "plan_hash": "plan_hash",
                 "git_commit": "git_commit"}


class NotAStore(Exception):
    """An HDF5 file without the rcsweep format attribute: not listed."""


def find_stores(paths):
    """The files a listing looks at, in order: each path given that is a file, and every *.h5 and
    *.hdf5 file under each folder given (recursively, sorted; links to folders not followed)."""
    found, seen = [], set()
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for name in sorted(files):
                    if name.lower().endswith(SUFFIXES):
                        found.append(Path(root) / name)
        else:
            found.append(p)
    out = []
    for f in found:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _text(f, name, most=_load.MAX_SHORT_TEXT, where=""):
    return _load._attr_text(f, name, most, where)


def read_entry(path):
    """The catalogue's record of the store at `path` (a dict of COLUMNS); StoreInvalid for a file
    the readers refuse, NotAStore for an HDF5 file that is not an rcsweep store."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise _load.StoreInvalid(f"{path}: not a regular file", path)
    size = os.stat(path).st_size
    try:
        if not h5py.is_hdf5(path):
            raise _load.StoreInvalid(f"{path}: not an HDF5 file", path)
        try:
            f = h5py.File(path, "r", locking=False)
        except TypeError:  # h5py < 3.5
            os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")
            f = h5py.File(path, "r")
    except OSError as e:
        raise _load.StoreInvalid(f"{path}: damaged HDF5 file ({e})", path) from None
    with f:
        if "format" not in f.attrs:
            raise NotAStore(path)
        _load._check_identity(f, path)
        try:
            try:
                return _entry(f, path, size)
            except _load._Refused as r:
                _load._refuse(path, str(r))
        except _load.StoreInvalid:
            raise
        except (OSError, KeyError, ValueError, TypeError, IndexError, RuntimeError, MemoryError, OverflowError) as e:
            _load._refuse(path, f"{type(e).__name__}: {e}")


def _entry(f, path, size):
    attrs = {}
    for name, required, most in _load.ROOT_TEXTS:
        if required or name in f.attrs:
            attrs[name] = _text(f, name, most)
    n_tasks = _load._int_in(f, "n_tasks", 1, _load.MAX_GRID * _load.MAX_GRID)
    reps = _load._int_in(f, "replicates", 1, _load.MAX_GRID)
    sweep = _load._stored_sweep(attrs)  # plan_hash is the hash of config, which parses
    if n_tasks != sweep["n_points"] * sweep["reps"] or reps != sweep["reps"]:
        _load._bad(f"attribute 'n_tasks' = {n_tasks}, but the stored sweep has {sweep['n_points'] * sweep['reps']} "
                   f"tasks ({sweep['n_points']} points x {sweep['reps']} replicates)")
    axes = {}
    for _, members in sweep["dims"]:
        axes.update(members)
    if isinstance(sweep["depths"], list) and sweep["depths"]:
        axes["depth"] = sweep["depths"]
    fixed = {k: v for k, v in sweep["model"].items() if k not in axes}

    kind = f.get("tasks", getclass=True)
    if kind is None:
        _load._bad("/tasks is missing")
    if kind is not h5py.Dataset:
        _load._bad("/tasks is not a dataset")
    tasks = f["tasks"]
    if tasks.dtype.names is None or "status" not in tasks.dtype.names:
        _load._bad("/tasks is not a task table (no 'status' field)")
    if tasks.ndim != 1 or tasks.shape[0] != n_tasks:
        _load._bad(f"/tasks has {tasks.shape[0] if tasks.ndim else 0} rows, expected {n_tasks}")
    # The rows as they lie in the file (no type conversion: some times faster than a field's read).
    rows = np.empty(tasks.shape, dtype=tasks.dtype)
    tasks.id.read(h5py.h5s.ALL, h5py.h5s.ALL, rows, mtype=tasks.id.get_type())
    status = rows["status"].astype(np.int8)
    wrong = np.flatnonzero((status < 0) | (status > max(_load.STATUS)))
    if wrong.size:
        _load._bad(f"task {wrong[0]} has an invalid status (not one of {_load.STATUS_VALUES})")
    counts = np.bincount(status.astype(np.int64), minlength=len(_load.STATUS))
    names = {name: int(counts[code]) for code, name in _load.STATUS.items()}

    hosts = []
    if f.get("provenance", getclass=True) is h5py.Group and "hosts" in f["provenance"].attrs:
        hosts = [h for h in _text(f["provenance"], "hosts", _load.MAX_LONG_TEXT, "/provenance ").split("\n") if h]
    return {"path": path, "sweep": attrs.get("sweep_name", sweep["name"]), "plan_hash": attrs["plan_hash"],
            "axes": axes, "fixed": fixed, "n_tasks": n_tasks, **{c: names[c] for c in COUNTS},
            "finished": attrs.get("finished", ""), "version": attrs.get("rcsweep_version", ""),
            "git_commit": attrs.get("git_commit", ""), "created": attrs.get("created", ""),
            "host": attrs.get("host", ""), "hosts": hosts, "size_bytes": size, "refused": None}


def _read_settled(path):
    """read_entry, once more after a moment when it fails on a file being written (changed during
    the read, or in the last seconds): a writer may be rewriting the attributes it read."""
    try:
        before = os.stat(path).st_mtime_ns
    except OSError:
        before = None
    try:
        return read_entry(path)
    except (_load.StoreInvalid, OSError):
        try:
            st = os.stat(path)
        except OSError:
            raise
        if st.st_mtime_ns == before and time.time() - st.st_mtime > 5:
            raise
        time.sleep(0.2)
        return read_entry(path)


def _parse_where(where):
    """["k=v", "k=a,b"] (or a dict k -> value or list) -> {k: [text, ...]}."""
    if where is None:
        return {}
    if isinstance(where, dict):
        items = where.items()
    else:
        items = []
        for w in [where] if isinstance(where, str) else where:
            key, eq, value = str(w).partition("=")
            if not eq or not key.strip():
                raise ValueError(f"--where {w!r}: expected KEY=VALUE")
            items.append((key.strip(), value.split(",")))
    out = {}
    for k, v in items:
        vals = v if isinstance(v, (list, tuple)) else [v]
        out.setdefault(k, []).extend(str(x).strip() if isinstance(x, str) else x for x in vals)
    return out


def _same(have, want):
    if isinstance(have, bool) or isinstance(want, bool):
        return str(have).lower() == str(want).lower()
    if isinstance(have, (int, float, np.integer, np.floating)):
        try:
            w = float(want)
        except (TypeError, ValueError):
            return False
        return float(have) == w or (math.isnan(float(have)) and math.isnan(w))
    return str(have) == str(want)


def _values(entry, key):
    """The values of KEY in a store (a list), or None when the store has no such key."""
    if key in entry["axes"]:
        return list(entry["axes"][key])
    if key in entry["fixed"]:
        return [entry["fixed"][key]]
    if key in WHERE_COLUMNS:
        return [entry[WHERE_COLUMNS[key]]]
    return None


def matches(entry, conditions):
    """Whether the store `entry` (read_entry) meets every condition ({key: [values]})."""
    for key, wanted in conditions.items():
        have = _values(entry, key)
        if have is None or not any(_same(h, w) for h in have for w in wanted):
            return False
    return True


def entries(paths, where=None, on_refused=None):
    """(records of the stores found under `paths` that meet `where`, refused {path: message}).
    `on_refused(path, message)` is called as each refused file is met."""
    conditions = _parse_where(where)
    kept, known, refused = [], set(WHERE_COLUMNS), {}
    for path in find_stores(paths):
        try:
            entry = _read_settled(path)
        except NotAStore:
            continue
        except (_load.StoreInvalid, OSError) as e:
            refused[os.fspath(path)] = str(e)
            if on_refused:
                on_refused(os.fspath(path), str(e))
            continue
        known.update(entry["axes"], entry["fixed"])
        if matches(entry, conditions):
            kept.append(entry)
    unknown = [k for k in conditions if k not in known]
    if unknown and len(known) > len(WHERE_COLUMNS):  # some store was read
        raise ValueError(f"--where {unknown[0]}: no listed store has a parameter '{unknown[0]}' (a model parameter, "
                         "or sweep, host, version, plan_hash, git_commit)")
    return kept, refused


def catalog(paths, where=None):
    """A pandas.DataFrame of the stores under `paths` (folders, searched recursively, or files): one
    row per store with COLUMNS (`axes`: {parameter: values} of the swept ones, `fixed`: {parameter:
    value} of the others, the task counts, `size_bytes`), filtered by `where` ("mixer=ssd", a list
    of such conditions or a dict {"mixer": "ssd"}; see the module's text). Stores refused as damaged
    are rows too, with their message in `refused` and nothing else; `df.attrs["refused"]` maps their
    paths to it. A key that no store knows raises ValueError."""
    import pandas as pd

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    kept, refused = entries(paths, where)
    rows = kept + [{**{c: None for c in COLUMNS}, "path": p, "refused": m} for p, m in refused.items()]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df.attrs["refused"] = dict(refused)
    return df


def _value_text(v):
    return _load._to_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _axes_text(axes):
    return "; ".join(f"{k}={','.join(_value_text(v) for v in vals)}" for k, vals in axes.items()) or "-"


def _size_text(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _progress_text(e):
    parts = [f"{e['done']}/{e['n_tasks']} done"]
    parts += [f"{e[c]} {c.replace('_', ' ')}" for c in COUNTS[1:] if e[c]]
    return ", ".join(parts)


def table(kept):
    """The lines of the listing: one per store, then the fixed parameters in which the stores differ."""
    keys = {k for e in kept for k in e["fixed"]}
    varying = sorted(k for k in keys if len({json.dumps(x["fixed"].get(k), sort_keys=True, default=str)
                                             for x in kept if k not in x["axes"]}) > 1)
    head = ["STORE", "SWEEP", "PLAN", "AXES", *varying, "TASKS", "VERSION", "CREATED", "HOST", "SIZE"]
    rows = []
    for e in kept:
        rows.append([e["path"], e["sweep"], e["plan_hash"], _axes_text(e["axes"]),
                     *[("(swept)" if k in e["axes"] else _value_text(e["fixed"].get(k, "-"))) for k in varying],
                     _progress_text(e) + ("" if e["finished"] else " (not finished)"),
                     e["version"] + (f" ({e['git_commit'][:12]})" if e["git_commit"] else ""), e["created"],
                     ",".join(e["hosts"]) or e["host"], _size_text(e["size_bytes"])])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + rows]
    if kept:
        common = {k: v for k, v in kept[0]["fixed"].items() if k not in varying and
                  all(k not in e["axes"] and e["fixed"].get(k) == v for e in kept)}
        if common:
            lines.append("fixed in every store listed: " +
                         ", ".join(f"{k}={_value_text(v)}" for k, v in common.items()))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(prog="rcsweep ls", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", default=["."], help="folders (searched recursively) or stores; default: .")
    p.add_argument("--where", nargs="+", default=[], metavar="KEY=VALUE",
                   help="keep the stores whose parameter KEY has VALUE (fixed, or among a swept axis' values)")
    p.add_argument("--json", action="store_true", help="one JSON object per line per store (refused ones too)")
    a = p.parse_args(argv)
    # `rcsweep ls --where mixer=ssd runs/`: the folders after the conditions are folders still
    folders = [w for w in a.where if "=" not in w and os.path.exists(w)]
    if folders:
        a.where = [w for w in a.where if w not in folders]
        a.paths = ([] if a.paths == ["."] else a.paths) + folders
    for path in a.paths:
        if not os.path.exists(path):
            print(f"error: {path}: no such file or folder", file=sys.stderr)
            return 2

    def refused_line(path, message):
        if a.json:
            print(json.dumps({"path": path, "refused": message}))
        else:
            print(f"refused {message}", file=sys.stderr)

    try:
        kept, refused = entries(a.paths, a.where or None, refused_line)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        for e in kept:
            print(json.dumps(e, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
    else:
        for line in table(kept):
            print(line)
        print(f"{len(kept)} store{'s' if len(kept) != 1 else ''}" + (f" where {' '.join(a.where)}" if a.where else "") +
              (f"; {len(refused)} refused (damaged: above)" if refused else ""), file=sys.stderr)
    return 2 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
