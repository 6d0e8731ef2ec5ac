"""Export an rcsweep store for other tools.

    rcsweep export STORE [-o FILE] [--format csv|parquet|netcdf] [--status done|all|S,S...]
                                                                      (or rcsweep-export ...)
    export(store, path, format=None, status="done")                    (Python)

csv and parquet: the tidy table (one row per task and layer: the swept parameters, replicate,
layer, the /layers metrics (every one the store holds), status), as `tidy(store)` gives it, with
the rows of the done tasks only by default: `--status` chooses which tasks' rows are written
(`done`, `all`, or statuses separated by commas: `done,diverged,vanished`; the names of
docs/SCHEMA.md "/tasks": pending, done, failed, diverged, not_needed, vanished). The other tasks'
rows hold no values (pending, failed and not needed tasks have none; a diverged or vanished task
has the layers it reached). netcdf: the Dataset of `load(store)` (grid dimensions x replicate x
layer, with the store's attributes: every task, the status variable saying which hold values),
written by xarray (the netCDF4 library when installed, else scipy's netCDF3 writer). The format is taken from the
output's extension (.csv, .parquet, .nc) unless given. Parquet needs pyarrow or fastparquet,
which Debian 12 does not package: without them it is refused with exit code 2.
"""
import argparse
import sys
from pathlib import Path

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".nc": "netcdf", ".nc4": "netcdf"}
SUFFIX = {"csv": ".csv", "parquet": ".parquet", "netcdf": ".nc"}


class ExportError(ValueError):
    pass


def status_codes(status):
    """The status codes that `status` names: "all" (None: every task), a name ("done"), names
    separated by commas ("done,diverged") or a list of names. ExportError for a name that is not a
    task status (docs/SCHEMA.md "/tasks")."""
    from .load import STATUS

    names = status.split(",") if isinstance(status, str) else list(status)
    names = [str(n).strip() for n in names if str(n).strip()]
    if not names:
        raise ExportError("--status names no status: all, or some of " + ", ".join(STATUS.values()))
    if "all" in names:
        return None
    codes = {name: code for code, name in STATUS.items()}
    codes.update({name.replace("_", " "): code for code, name in STATUS.items()})
    unknown = [n for n in names if n not in codes]
    if unknown:
        raise ExportError(f"unknown status {unknown[0]!r}: all, or some of " + ", ".join(STATUS.values()))
    return sorted({codes[n] for n in names})


def export(store, path=None, format=None, status="done"):
    """Write `store` as `format` (csv, parquet, netcdf; default: from the extension of `path`, else
    csv) to `path` (default: the store's name with the format's extension). csv and parquet hold
    the rows of the tasks whose status `status` names (default "done"; "all", a name, names
    separated by commas or a list: status_codes); netcdf holds the whole grid, so there `status`
    must be "done" or "all". Returns the path."""
    from .load import load, tidy

    store = Path(store)
    if format is None:
        format = FORMATS.get(Path(path).suffix.lower(), "csv") if path else "csv"
    if format not in SUFFIX:
        raise ExportError(f"unknown format {format!r}: csv, parquet or netcdf")
    codes = status_codes(status)
    if format == "netcdf" and codes not in (None, status_codes("done")):
        raise ExportError("netcdf holds the whole grid (every task, with its status): --status chooses the rows "
                          "of csv and parquet only")
    path = Path(path) if path else Path(store.name).with_suffix(SUFFIX[format])

    def table():
        t = tidy(store)
        return t if codes is None else t[t["status"].isin(codes)].reset_index(drop=True)

    if format == "csv":
        table().to_csv(path, index=False)
    elif format == "parquet":
        try:
            table().to_parquet(path, index=False)
        except ImportError:
            raise ExportError("parquet needs pyarrow or fastparquet, which are not installed here; "
                              "export csv or netcdf instead") from None
    else:
        ds = load(store)
        # netCDF attributes are numbers or strings: the store's are, but for None and bools.
        ds.attrs = {k: (str(v) if isinstance(v, bool) or v is None else v) for k, v in ds.attrs.items()}
        try:
            import netCDF4  # noqa: F401
            engine = "netcdf4"
        except ImportError:
            engine = "scipy"
            for name in list(ds.variables):  # netCDF3 has no variable-length strings
                if ds[name].dtype == object:
                    ds[name] = ds[name].astype(str)
        ds.to_netcdf(path, engine=engine)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(prog="rcsweep export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", help="rcsweep HDF5 store")
    p.add_argument("-o", "--output", help="output file (default: the store's name with the format's extension)")
    p.add_argument("--format", choices=sorted(SUFFIX), help="default: from the output's extension, else csv")
    p.add_argument("--status", default="done",
                   help="csv and parquet: the rows of the tasks of these statuses, separated by commas "
                        "(pending, done, failed, diverged, not_needed, vanished), or all (default: done)")
    a = p.parse_args(argv)
    from .load import StoreInvalid

    if not Path(a.store).is_file():
        print(f"error: {a.store}: no such file", file=sys.stderr)
        return 2
    try:
        out = export(a.store, a.output, a.format, a.status)
    except (ExportError, StoreInvalid) as e:  # StoreInvalid: the line `rcsweep info` prints
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, KeyError) as e:
        print(f"error: {a.store}: cannot export: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
