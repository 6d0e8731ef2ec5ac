"""Summarise an rcsweep store: a table of last-layer metrics per grid point and a PNG plot of a
metric against layer.

Run with Debian's interpreter (it has h5py, numpy, matplotlib):
    rcsweep-summary OUT.h5 [--metric sr_cov] [--png OUT.png]     (installed), or from a checkout
    /usr/bin/python3 scripts/rcsweep_summary.py OUT.h5 [--metric sr_cov] [--png OUT.png]

Table: one row per grid point with the swept parameters, the mean ± sample standard deviation
(ddof = 1) over the done replicates of each metric at the last layer, `n` (how many replicates are done: the ones the
values rest on; with adaptive replicates it differs from point to point) and, in `not done`, the
other replicates of the point by outcome, each by the store's name (load.outcome_words: "2 not
needed" an adaptive rule did not need, "1 diverged" X non-finite, "1 vanished" X exactly zero,
"1 failed", "1 pending"; "0" when every replicate is done).
Plot: the metric against layer (mean over replicates, band ± 1 sd of the replicates: the same
sd as the table's and rcsweep-plot's default band), one panel per value of
the first swept dimension (wrapped into rows of at most about sqrt(n) panels), one row per value of
the last (with 3 or more), colour by the second, line style by the third, the first value of any
further one (rcsweep-plot STORE --y METRIC draws any other choice).
"""
import argparse
import sys

import numpy as np

from .load import StoreInvalid, layer_metrics, open_store, outcome_counts, outcome_words
TABLE_METRICS = ("sr_cov", "sr_x", "mu_rel", "m_gap")


def text(v):
    if isinstance(v, bytes):
        return v.decode().rstrip("\x00")
    if isinstance(v, (float, np.floating)):
        return f"{v:g}"
    return str(v)


def load(path):
    """Per-point arrays: {metric: [n_points, n_replicates, n_layers]}, swept names, point labels."""
    try:  # read-only without HDF5's file lock (a running sweep reads too), checked against the schema
        f = open_store(path)
    except StoreInvalid as e:  # the line `rcsweep info` prints for the same file, exit 2 like it
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        print(f"error: {e}" if str(path) in str(e) else f"error: {path}: {e}", file=sys.stderr)
        sys.exit(2)
    with f:
        tasks = f["tasks"][...]
        points = f["points"][...]
        replicates = int(f.attrs["replicates"])
        # the swept parameters as checked (open_store): the names /axes' `order` lists
        swept = [name for name in f["axes"].attrs["order"].split(",") if name and name not in ("layer", "depth")]
        # keep the axes in the order of the /points index columns (the grid order)
        order = [n[4:] for n in points.dtype.names if n.startswith("idx_")]
        swept_params = []
        for dim in order:
            swept_params += [n for n in swept if text(f["axes"][n].attrs.get("dim", n)) == dim]
        n_points = len(points)
        data = {}
        for name in layer_metrics(f):  # schema 2's, then any other metric the store holds
            values = f["layers"][name][...]
            arr = np.full((n_points, replicates, values.shape[1]), np.nan)
            arr[tasks["point"], tasks["replicate"]] = values
            data[name] = arr
        status = np.zeros((n_points, replicates), dtype=int)
        status[tasks["point"], tasks["replicate"]] = tasks["status"]
        labels = [{p: text(points[p][i]) for p in swept_params} for i in range(n_points)]
        return data, status, swept_params, labels, text(f.attrs.get("sweep_name", path))


def print_table(data, status, swept, labels, out=None, statuses=None):
    """The table (module docstring); `statuses` code -> name of the store's /tasks status
    enumeration (load.task_statuses; load.STATUS by default)."""
    out = sys.stdout if out is None else out  # looked up per call: stdout may be redirected
    last = next(iter(data.values())).shape[2] - 1
    head = [*swept] + [f"{m}@L{last}" for m in TABLE_METRICS] + ["n", "not done"]
    rows = []
    for i, lab in enumerate(labels):
        row = [lab[p] for p in swept]
        done = status[i] == 1  # only done replicates carry values (pending rows may be partial)
        for m in TABLE_METRICS:
            x = data[m][i, done, last]
            x = x[np.isfinite(x)]
            with np.errstate(all="ignore"):
                row.append(f"{x.mean():.4g} ± {x.std(ddof=1):.2g}" if len(x) > 1 else (f"{x[0]:.4g}" if len(x) else "—"))
        row.append(str(int(np.sum(done))))
        row.append(outcome_words(outcome_counts(status[i], statuses)) or "0")
        rows.append(row)
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(fmt.format(*r), file=out)


def plot(store, metric, png, title):
    """The metric against layer (facet.draw): panels by the first swept dimension (wrapped into
    rows), rows by the last one (with 3+), colour by the second, line style by the third; the
    first value of any further one. Band ± 1 sd of the replicates (plot.DEFAULT_BAND, the table's sd);
    log y when every value is > 0."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from . import facet
    from .load import load as load_dataset
    from .plot import DEFAULT_BAND, band_text

    ds = load_dataset(store)
    dims = [d for d in ds["status"].dims if d != "replicate" and ds.sizes[d] > 1]
    roles = {"col": dims[0] if dims else None, "hue": dims[1] if len(dims) > 1 else None,
             "row": dims[-1] if len(dims) > 2 else None, "dash": dims[2] if len(dims) > 3 else None}
    rest = {d: ds[d].values[0].item() for d in dims[3:-1]}
    if rest:
        print("plot: " + ", ".join(f"{d} = {v}" for d, v in rest.items()) + " only (rcsweep-plot --sel picks others)")
    values = ds[metric].values
    logy = bool(np.isfinite(values).any() and np.nanmin(values) > 0)
    fig = Figure(layout="constrained")
    facet.draw(ds, fig, metric, x="layer", sel=rest, band=DEFAULT_BAND, logy=logy, **roles)
    fig.suptitle(f"{title}: {metric} against layer (mean over replicates, {band_text(DEFAULT_BAND)})", fontsize=10)
    fig.savefig(png, dpi=130)
    print(f"wrote {png}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--metric", default="sr_cov", help="metric to plot against layer (default sr_cov)")
    ap.add_argument("--png", help="write the plot here (default: no plot)")
    args = ap.parse_args(argv)
    data, status, swept, labels, title = load(args.store)
    if args.metric not in data:
        ap.error(f"unknown metric {args.metric!r}; the store has {', '.join(sorted(data))}")
    try:
        print_table(data, status, swept, labels)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return
    if args.png:
        plot(args.store, args.metric, args.png, title)

