"""Summarise an rcsweep store: a table of last-layer metrics per grid point and a PNG plot of a
metric against layer.

Run with Debian's interpreter (it has h5py, numpy, matplotlib):
    rcsweep-summary OUT.h5 [--metric sr_cov] [--png OUT.png]     (installed), or from a checkout
    /usr/bin/python3 scripts/rcsweep_summary.py OUT.h5 [--metric sr_cov] [--png OUT.png]

Table: one row per grid point with the swept parameters, the mean +- standard deviation over
replicates of each metric at the last layer, and how many replicates diverged or failed.
Plot: the metric against layer (mean over replicates, band = min..max), one panel per value of
the first swept axis, one line per combination of the others.
"""
import argparse
import sys

import h5py
import numpy as np

STATUS = {0: "pending", 1: "done", 2: "failed", 3: "diverged"}
TABLE_METRICS = ("sr_cov", "sr_x", "mu_rel", "m_gap")


def text(v):
    if isinstance(v, bytes):
        return v.decode().rstrip("\x00")
    if isinstance(v, (float, np.floating)):
        return f"{v:g}"
    return str(v)


def load(path):
    """Per-point arrays: {metric: [n_points, n_replicates, n_layers]}, swept names, point labels."""
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("rcsweep", b"rcsweep"):
            sys.exit(f"error: {path} is not an rcsweep store")
        tasks = f["tasks"][...]
        points = f["points"][...]
        replicates = int(f.attrs["replicates"])
        swept = [name for name in f["axes"] if name not in ("layer", "depth")]
        # keep the axes in the order of the /points index columns (the grid order)
        order = [n[4:] for n in points.dtype.names if n.startswith("idx_")]
        swept_params = []
        for dim in order:
            swept_params += [n for n in swept if text(f["axes"][n].attrs.get("dim", n)) == dim]
        n_points = len(points)
        data = {}
        for name in f["layers"]:
            values = f["layers"][name][...]
            arr = np.full((n_points, replicates, values.shape[1]), np.nan)
            arr[tasks["point"], tasks["replicate"]] = values
            data[name] = arr
        status = np.zeros((n_points, replicates), dtype=int)
        status[tasks["point"], tasks["replicate"]] = tasks["status"]
        labels = [{p: text(points[p][i]) for p in swept_params} for i in range(n_points)]
        return data, status, swept_params, labels, text(f.attrs.get("sweep_name", path))


def print_table(data, status, swept, labels, out=sys.stdout):
    last = next(iter(data.values())).shape[2] - 1
    head = [*swept] + [f"{m}@L{last}" for m in TABLE_METRICS] + ["bad"]
    rows = []
    for i, lab in enumerate(labels):
        row = [lab[p] for p in swept]
        for m in TABLE_METRICS:
            x = data[m][i, :, last]
            x = x[np.isfinite(x)]
            with np.errstate(all="ignore"):
                row.append(f"{x.mean():.4g} ± {x.std():.2g}" if len(x) > 1 else (f"{x[0]:.4g}" if len(x) else "—"))
        bad = int(np.sum((status[i] == 2) | (status[i] == 3)))
        pend = int(np.sum(status[i] == 0))
        row.append(f"{bad}" + (f" (+{pend} pending)" if pend else ""))
        rows.append(row)
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(fmt.format(*r), file=out)


def plot(data, swept, labels, metric, png, title):
    """Panels: columns by the first swept axis, rows by the last one (with 3+ axes); colour by the
    second axis, line style by the rest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def values_of(p):
        seen = []
        for lab in labels:
            if lab[p] not in seen:
                seen.append(lab[p])
        return seen

    col_axis = swept[0] if swept else None
    row_axis = swept[-1] if len(swept) >= 3 else None
    colour_axis = swept[1] if len(swept) >= 2 else None
    style_axes = [p for p in swept[2:] if p != row_axis]
    cols = values_of(col_axis) if col_axis else [None]
    rows = values_of(row_axis) if row_axis else [None]
    colours = {v: f"C{i % 10}" for i, v in enumerate(values_of(colour_axis))} if colour_axis else {}
    styles = ["-", "--", ":", "-."]
    style_keys = []
    for lab in labels:
        key = tuple(lab[p] for p in style_axes)
        if key not in style_keys:
            style_keys.append(key)

    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.6 * len(cols) + 2.2, 3.6 * len(rows)),
                             squeeze=False, sharex=True, sharey=True)
    layers = np.arange(data[metric].shape[2])
    for r, rv in enumerate(rows):
        for c, cv in enumerate(cols):
            ax = axes[r][c]
            for i, lab in enumerate(labels):
                if (col_axis and lab[col_axis] != cv) or (row_axis and lab[row_axis] != rv):
                    continue
                y = data[metric][i]
                ok = np.isfinite(y).any(axis=0)
                if not ok.any():
                    continue
                with np.errstate(all="ignore"):
                    mean = np.nanmean(y[:, ok], axis=0)
                    lo, hi = np.nanmin(y[:, ok], axis=0), np.nanmax(y[:, ok], axis=0)
                colour = colours.get(lab[colour_axis], "C0") if colour_axis else "C0"
                style = styles[style_keys.index(tuple(lab[p] for p in style_axes)) % len(styles)]
                ax.plot(layers[ok], mean, style, color=colour, marker="o", ms=2.5, lw=1.2)
                ax.fill_between(layers[ok], lo, hi, color=colour, alpha=0.12, lw=0)
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            heading = [f"{a} = {v}" for a, v in ((col_axis, cv), (row_axis, rv)) if a]
            ax.set_title(", ".join(heading) or title, fontsize=10)
            if r == len(rows) - 1:
                ax.set_xlabel("layer ℓ")
    axes[len(rows) // 2][0].set_ylabel({"sr_cov": "stable rank of X Xᵀ  (Σs⁴/s₁⁴)",
                                        "sr_x": "stable rank of X  (Σs²/s₁²)",
                                        "mu_rel": "μ(X) / ‖X‖_F"}.get(metric, metric))
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=col, lw=2, label=f"{colour_axis} = {v}") for v, col in colours.items()]
    if style_axes:
        handles += [Line2D([], [], color="k", ls=styles[k % len(styles)],
                           label=", ".join(f"{p} = {v}" for p, v in zip(style_axes, key)))
                    for k, key in enumerate(style_keys)]
    if handles:
        fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(f"{title}: {metric} against layer (mean over replicates, band min–max)")
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / fig.get_figwidth(), 1))
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
        plot(data, swept, labels, args.metric, args.png, title)

