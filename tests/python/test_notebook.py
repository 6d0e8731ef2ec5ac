"""docs/examples/lambda_scan.ipynb executed headless (nbclient) as a user would: every cell runs
without an error, the plan has 16 tasks, the store holds them all, the figure is written and the
last cell prints the stable rank at the last layer for each lambda, which grows with lambda (no
skip collapses to rank 1, MODELS.md)."""
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
    ranks = [float(v) for v in re.findall(r"lambda +[\d.]+: stable rank at layer 12 = ([\d.]+)", text)]
    assert len(ranks) == 4
    assert ranks[0] < 1.01 and ranks[-1] > ranks[0]
