"""docs/examples/lambda_scan.ipynb executed headless (nbclient) as a user would: every cell runs
without an error, the plan has 16 tasks, the store holds them all, the figure is written, the
plotting cell prints the stable rank at the last layer for each lambda, and the numbers are the ones
the notebook's closing text states: lambda = 0 within 0.05 of rank 1 at layer 12 and from layer 4 on
(rank collapse, MODELS.md), lambda = 1 below 1.1, lambda = 4 between 3 and 5, lambda = 16 above 8,
growing with lambda; the conclusion cell, which prints its sentences from the numbers, printed the
ones that hold. A notebook whose prose its data contradict fails here."""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import BIN, SCRIPTS, SOURCE

NOTEBOOK = SOURCE / "docs" / "examples" / "lambda_scan.ipynb"


def test_example_notebook_runs_and_draws(tmp_path, monkeypatch):
    monkeypatch.setenv("RCSWEEP_BIN", BIN)
    monkeypatch.setenv("PYTHONPATH", str(SCRIPTS))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except Exception as e:  # noqa: BLE001 - the cell's error, with its output
        pytest.fail(f"the notebook failed: {e}")
    assert (tmp_path / "lambda_scan.h5").exists() and (tmp_path / "lambda_scan.png").stat().st_size > 5000
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "16 tasks" in text
    found = re.findall(r"lambda +([\d.]+): stable rank at layer 12 = ([\d.]+)", text)
    lams, ranks = [float(lam) for lam, _ in found], [float(v) for _, v in found]
    assert lams == [0.0, 1.0, 4.0, 16.0], text
    # the closing markdown cell's statements, one by one
    assert abs(ranks[0] - 1.0) < 0.05, f"lambda = 0 does not collapse by layer 12: {ranks}"
    assert ranks[1] < 1.1, f"lambda = 1 is not below 1.1 at layer 12: {ranks}"
    assert 3.0 < ranks[2] < 5.0, f"lambda = 4 is not between 3 and 5 at layer 12: {ranks}"
    assert ranks[3] > 8.0, f"lambda = 16 is not above 8 at layer 12: {ranks}"
    assert all(a < b for a, b in zip(ranks, ranks[1:])), f"the stable rank does not grow with lambda: {ranks}"
    # the conclusion cell chose the sentences that hold (and not their negations)
    first = re.search(r"lambda = 0 collapses: stable rank [\d.]+ at layer 12 \(within 0.05 of 1 from layer (\d+) on\)", text)
    assert first and int(first.group(1)) <= 4, text
    assert "the stable rank at layer 12 grows with lambda" in text, text
    assert "lambda >= 4 keeps the stable rank above 2 at layer 12; lambda = 16 keeps" in text, text
    assert "does not" not in text and "every lambda collapses" not in text, text
