"""docs/ANALYTIC.md's [Sys-1] and [Sys-2] tables are what the store says: every cell of both tables
against a fresh `rcsweep run jobs/examples/sys1.toml` / `sys2.toml` (T = d = 2, depth 50: well
under a second). A number agrees when the store's value rounded to the digits written is that
number; "0" and "0*" mean exactly 0; "≤ x" bounds every task of a row; a "NaN (...)" cell names how
the store says the task ended (vanished or diverged), and the cells after it are NaN."""
import re

import h5py
import numpy as np
import pytest

from conftest import SOURCE, rcsweep

DOC = SOURCE / "docs" / "ANALYTIC.md"
LAYERS = (1, 5, 20, 49, 50)
STATUS_WORDS = {3: "diverged", 5: "vanished"}


def number(text):
    return float(text.replace("−", "-"))


def significant_digits(text):
    mantissa = text.replace("−", "").replace("-", "").split("e")[0].replace(".", "").lstrip("0")
    return max(len(mantissa), 1)


def agrees(cell, value):
    """Whether a table cell (a number as written, 0, 0* or ≤ x) is the store's value."""
    cell = cell.strip()
    if cell in ("0", "0*"):
        return value == 0.0
    if cell.startswith("≤"):
        return value <= number(cell[1:].strip())
    want = number(cell)
    return float(f"{value:.{significant_digits(cell)}g}") == want


def table(section):
    """The rows (lists of cells) of the first table under the heading `section`."""
    text = DOC.read_text()
    start = text.index(section)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[0], rows[1:]


def lambdas_of(cell, have):
    """The store's lambdas a λ cell names: one value, or a range 'a … b (...)'."""
    if "…" in cell:
        lo, hi = (number(v.split("(")[0].strip()) for v in cell.split("…"))
        return [v for v in have if min(lo, hi) <= v <= max(lo, hi)]
    return [number(cell)]


def store_rows(sweep, tmp_path):
    store = tmp_path / f"{sweep}.h5"
    rcsweep("run", SOURCE / "jobs" / "examples" / f"{sweep}.toml", "-o", store, "-q", check=0)
    with h5py.File(store, "r") as f:
        pts = f["points"][...][f["tasks"]["point"][...]]
        status = f["tasks"]["status"][...]
        mu, s1, s2 = (f["layers"][m][...] for m in ("mu", "s1", "s2"))
    out = {}
    for t, p in enumerate(pts):
        norm = p["norm"].decode() if "norm" in p.dtype.names else "rms"
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = s2[t, 50] / s1[t, 50]
        out[(norm, float(p["lambda"]))] = (int(status[t]), [mu[t, k] for k in LAYERS] + [ratio])
    return out


@pytest.mark.parametrize("sweep,section", [("sys1", "## [Sys-1]"), ("sys2", "## [Sys-2]")])
def test_analytic_table_is_the_store(tmp_path, sweep, section):
    got = store_rows(sweep, tmp_path)
    head, rows = table(section)
    has_norm = head[0] == "norm"
    seen = set()
    for row in rows:
        norm = row[0] if has_norm else "rms"
        cells = row[2:] if has_norm else row[1:]
        lam_cell = row[1] if has_norm else row[0]
        lams = lambdas_of(lam_cell, sorted(l for (n, l) in got if n == norm))
        assert lams, row
        for lam in lams:
            status, values = got[(norm, lam)]
            seen.add((norm, lam))
            ended = False
            for k, (cell, value) in enumerate(zip(cells, values)):
                where = f"{section} norm {norm} lambda {lam} column {head[k + (2 if has_norm else 1)]}: '{cell}'"
                if ended or cell.startswith("NaN"):
                    assert np.isnan(value), where + f" but the store has {value}"
                    if cell.startswith("NaN"):
                        ended = True
                        word = re.search(r"diverged|vanish", cell)
                        assert word and STATUS_WORDS.get(status, "done").startswith(word.group(0)), \
                            where + f" but the store's status is {STATUS_WORDS.get(status, status)}"
                    continue
                assert agrees(cell, value), where + f" but the store has {value:.6g}"
            if not ended:
                assert status == 1, f"{section} lambda {lam}: the store's status is {status}"
    assert seen == set(got), f"rows missing from {section}: {sorted(set(got) - seen)}"
