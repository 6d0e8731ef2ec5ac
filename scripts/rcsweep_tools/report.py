"""The reproduction report: one HTML page with every figure (PNG), its sweep file and the
provenance of the store it was drawn from. scripts/reproduce.sh writes it; it can be built from
any stores and PNGs already made:

    /usr/bin/python3 -m rcsweep_tools.report build --out report --stores out --figures out \
        [--sweeps jobs/examples] [FIGURE ...]
    /usr/bin/python3 -m rcsweep_tools.report uptodate STORE PLAN_HASH   # exit 0: finished store of that plan

(run from scripts/, or with scripts/ on PYTHONPATH). A figure's store is <stores>/<sweep stem>.h5,
its PNG <figures>/<figure>.png and its sweep file <sweeps>/<sweep> (the registry's file name). A
figure whose PNG is missing gets a note instead of an image (and `build` exits 1).

The page copies the PNGs into <out>/figures/, so it can be moved as one folder. A small script
marks every <img> after the page has loaded with data-natural-width (0 = broken) and writes the
count of loaded images into #image-status: tests read both from headless Chromium's DOM.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import html
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

# root attributes shown as provenance, in this order (docs/SCHEMA.md "Root group")
PROVENANCE = ("sweep_name", "rcsweep_version", "git_commit", "created", "finished", "mpi_ranks", "threads",
              "host", "plan_hash", "seed", "replicates", "n_points", "n_tasks", "max_depth", "blas",
              "hdf5_version", "schema_version")


@dataclass
class Entry:
    name: str
    paper: str
    title: str
    sweep: Path            # the sweep file
    store: Path | None     # the store the figure was drawn from
    png: Path | None       # the drawn figure (None or missing: not drawn)
    note: str = ""         # why it is missing, or a remark
    provenance: dict = field(default_factory=dict)


def provenance(store):
    """Root attributes of a store (PROVENANCE order) plus the count of tasks per outcome ("28 done,
    4 not needed, 1 diverged": load.outcome_words)."""
    import h5py
    import numpy as np

    from .load import outcome_counts, outcome_words, task_statuses

    out = {}
    with h5py.File(store, "r", locking=False) as f:
        for k in PROVENANCE:
            if k in f.attrs:
                v = f.attrs[k]
                v = v.item() if isinstance(v, np.generic) else v
                out[k] = v.decode() if isinstance(v, bytes) else v
        # the store's /tasks status enumeration names them: done first, then the other outcomes
        counts = outcome_counts(f["tasks"]["status"][...], task_statuses(f))
        out["tasks"] = ", ".join(w for w in (f"{counts['done']} done" if counts.get("done") else "",
                                             outcome_words(counts)) if w)
    if not out.get("finished"):
        out["finished"] = "(not finished)"
    return out


def store_up_to_date(store, plan_hash):
    """True when `store` is an rcsweep store of the plan `plan_hash` whose last run finished with no
    task pending (so running the sweep again would compute nothing)."""
    import h5py

    try:
        with h5py.File(store, "r", locking=False) as f:
            if f.attrs.get("format") != "rcsweep" or f.attrs.get("plan_hash") != plan_hash:
                return False
            if not f.attrs.get("finished"):
                return False
            return not (f["tasks"]["status"][...] == 0).any()
    except (OSError, KeyError):
        return False


def entries_from_dirs(stores, figures, sweeps, names=None):
    """Entries for the registered figures `names` (default: all), with their files under the dirs."""
    from .figures import FIGURES

    names = list(FIGURES) if not names else names
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise KeyError(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    out = []
    for n in names:
        f = FIGURES[n]
        store = Path(stores) / (Path(f.sweep).stem + ".h5")
        png = Path(figures) / f"{n}.png"
        out.append(Entry(n, f.paper, f.title, Path(sweeps) / f.sweep, store if store.exists() else None,
                         png if png.exists() else None))
    return out


def _table(d):
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in d.items())
    return f'<table class="prov">{rows}</table>'


SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.figure');
  var ok = 0;
  imgs.forEach(function (im) {
    var w = (im.complete && im.naturalWidth) ? im.naturalWidth : 0;
    im.setAttribute('data-natural-width', String(w));
    im.setAttribute('data-natural-height', String(im.naturalHeight || 0));
    if (w > 0) ok += 1;
  });
  var s = document.getElementById('image-status');
  s.setAttribute('data-loaded', String(ok));
  s.setAttribute('data-total', String(imgs.length));
  s.textContent = ok + ' of ' + imgs.length + ' figures loaded';
});
"""

STYLE = """
body { font-family: sans-serif; max-width: 1200px; margin: 1em auto; padding: 0 1em; }
section { border-top: 1px solid #ccc; margin-top: 1.5em; }
img.figure { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 85%; }
table.prov { border-collapse: collapse; font-size: 85%; }
table.prov th { text-align: left; padding-right: 1em; font-weight: normal; color: #555; }
.missing { color: #b00; }
"""


def build(out_dir, entries, generated=None):
    """Write <out_dir>/index.html (and copy the PNGs to <out_dir>/figures/); returns its path."""
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    generated = generated or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    toc, sections = [], []
    for e in entries:
        anchor = html.escape(e.name)
        toc.append(f'<li><a href="#{anchor}">{html.escape(e.name)}</a> ({html.escape(e.paper)}): '
                   f"{html.escape(e.title)}</li>")
        parts = [f'<section id="{anchor}"><h2>{html.escape(e.name)} &mdash; {html.escape(e.paper)}</h2>',
                 f"<p>{html.escape(e.title)}</p>"]
        if e.png is not None and Path(e.png).exists():
            dest = out_dir / "figures" / f"{e.name}.png"
            if Path(e.png).resolve() != dest.resolve():
                shutil.copyfile(e.png, dest)
            parts.append(f'<img class="figure" src="figures/{html.escape(e.name)}.png" '
                         f'alt="{html.escape(e.name)}: {html.escape(e.title)}">')
        else:
            parts.append(f'<p class="missing">not drawn{": " + html.escape(e.note) if e.note else ""}</p>')
        if e.store is not None and Path(e.store).exists():
            prov = e.provenance or provenance(e.store)
            parts.append(f"<h3>Store <code>{html.escape(Path(e.store).name)}</code> (provenance)</h3>")
            parts.append(_table(prov))
        else:
            parts.append('<p class="missing">no store</p>')
        sweep = Path(e.sweep)
        text = sweep.read_text() if sweep.exists() else "(sweep file not found)"
        parts.append(f"<h3>Sweep file <code>{html.escape(sweep.name)}</code></h3><pre>{html.escape(text)}</pre>")
        parts.append("</section>")
        sections.append("\n".join(parts))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>rcsweep: reproduced figures</title>
<style>{STYLE}</style>
<script>{SCRIPT}</script>
</head><body>
<h1>rcsweep: the seed papers' figures, reproduced</h1>
<p>Generated {html.escape(generated)} by <code>scripts/reproduce.sh</code>: each figure was drawn by
<code>scripts/rcsweep-plot STORE FIGURE</code> from the store its sweep file made (docs/FIGURES.md).
<span id="image-status" data-loaded="" data-total="{len(entries)}"></span></p>
<ul>{''.join(toc)}</ul>
{''.join(sections)}
</body></html>
"""
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rcsweep_tools.report", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write OUT/index.html from the stores and PNGs already made")
    b.add_argument("--out", default="report", help="report folder (default: report)")
    b.add_argument("--stores", default="out", help="folder of the stores <sweep stem>.h5 (default: out)")
    b.add_argument("--figures", default=None, help="folder of the PNGs <figure>.png (default: --stores)")
    here = Path(__file__).resolve().parents[2]
    b.add_argument("--sweeps", default=str(here / "jobs" / "examples"),
                   help="folder of the sweep files (default: jobs/examples)")
    b.add_argument("names", nargs="*", metavar="FIGURE", help="figures to include (default: every registered one)")
    u = sub.add_parser("uptodate", help="exit 0 if STORE is a finished store of plan PLAN_HASH, else 1")
    u.add_argument("store")
    u.add_argument("plan_hash")
    args = ap.parse_args(argv)
    if args.cmd == "uptodate":
        return 0 if store_up_to_date(args.store, args.plan_hash) else 1
    try:
        entries = entries_from_dirs(args.stores, args.figures or args.stores, args.sweeps, args.names)
    except KeyError as e:
        print(f"report: {e.args[0]}", file=sys.stderr)
        return 2
    index = build(args.out, entries)
    missing = [e.name for e in entries if e.png is None]
    print(f"report: wrote {index} ({len(entries) - len(missing)} of {len(entries)} figures)")
    if missing:
        print(f"report: not drawn: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
