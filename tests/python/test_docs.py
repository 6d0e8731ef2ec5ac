"""Docs that cannot drift: the README's "Using it" block runs as written; docs/SCHEMA.md names every
dataset and every /points field of a real store; docs/CONFIG.md's parameter table has the engine's
parameters in registry order, with its defaults and its choices."""
import os
import re
import subprocess

import h5py
import pytest

from conftest import BIN, SOURCE

DOCS = SOURCE / "docs"
FULL = """[sweep]
name = "docs"
replicates = 1
[model]
mixer = "softmax"
T = 4
d = 4
depth = 2
[axes]
lambda = [0.0, 1.0]
[output]
spectra = "all"
mixer_spectra = "all"
gradients = "all"
"""


def params_table():
    """(name, kind, default) rows of CONFIG.md's "Parameters" table."""
    text = (DOCS / "CONFIG.md").read_text()
    table = text[text.index("## Parameters"):text.index("## Matrices and input files")]
    return [tuple(c.strip() for c in line.strip("|").split("|")[:3])
            for line in table.splitlines() if line.startswith("| `")]


def test_readme_using_it_block_runs_as_written(tmp_path):
    readme = (SOURCE / "README.md").read_text()
    block = readme[readme.index("## Using it"):]
    block = block[block.index("```bash\n") + 8:]
    block = block[:block.index("```")]
    for name, target in (("build", os.path.dirname(BIN)), ("jobs", SOURCE / "jobs"), ("scripts", SOURCE / "scripts")):
        (tmp_path / name).symlink_to(target)
    env = {**os.environ, "HOME": str(tmp_path), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "MPLBACKEND": "Agg", "RCSWEEP_CALIBRATION": str(tmp_path / "calibration.toml")}
    proc = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{block}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    for made in ("quick.h5", "deep.h5", "mu.png", "width.h5", "width.svg", "mu_lambda.png", "out/ls-fig2.png",
                 "calibration.toml"):
        assert (tmp_path / made).exists(), made


@pytest.fixture(scope="module")
def full_store(run_sweep):
    return run_sweep(FULL)


def test_schema_names_every_dataset_and_points_field(full_store):
    schema = (DOCS / "SCHEMA.md").read_text()
    with h5py.File(full_store, "r") as f:
        datasets = []
        f.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
        fields = [n for n in f["points"].dtype.names if not n.startswith("idx_")]
        task_fields = f["tasks"].dtype.names
    for name in datasets:
        group, _, leaf = name.rpartition("/")
        in_group = f"`/{group}`" in schema or f"`/{group}/" in schema
        assert f"/{name}" in schema or (in_group and f"`{leaf}`" in schema), f"/{name} not in SCHEMA.md"
    listed = re.search(r"registry order `([^`]*)`", schema.replace("\n  ", " ")).group(1)
    assert [p.strip() for p in listed.split(",")] == fields
    for field in task_fields:
        assert f"| `{field}` |" in schema, f"/tasks field {field} not in SCHEMA.md"


def test_config_parameter_table_is_the_registry(tmp_path, run_sweep):
    rows = params_table()
    minimal = run_sweep("[sweep]\nname = \"defaults\"\n[model]\nT = 4\nd = 4\ndepth = 1\n")
    with h5py.File(minimal, "r") as f:
        point = f["points"][0]
        fields = [n for n in f["points"].dtype.names if not n.startswith("idx_")]
    assert [r[0].strip("`") for r in rows] == fields  # names, in registry order
    for name, kind, default in rows:
        name = name.strip("`")
        if default == "**required**":
            continue
        value = point[name]
        value = value.decode().rstrip("\0") if isinstance(value, bytes) else value
        written = default.strip("`").strip('"')
        if name == "lambda_mlp":  # "lambda": the value of lambda (0.0 by default)
            assert written == "lambda" and value == point["lambda"]
        elif isinstance(value, str):
            assert value == written, name
        else:
            assert float(value) == float(written), name
        if kind.startswith("choice:"):
            choices = re.findall(r"`([^`]*)`", kind)
            bad = tmp_path / f"{name}.toml"
            bad.write_text(f"[sweep]\nname = \"x\"\n[model]\nT = 4\nd = 4\ndepth = 1\n{name} = \"no-such-choice\"\n")
            proc = subprocess.run([BIN, "plan", str(bad)], capture_output=True, text=True)
            engine = re.search(rf"model\.{name}: must be one of (.*), got", proc.stderr).group(1)
            assert re.findall(r'"([^"]*)"', engine) == choices, name


def test_one_version_everywhere():
    cmake = re.search(r"project\(rcsweep VERSION (\S+)", (SOURCE / "CMakeLists.txt").read_text()).group(1)
    pyproject = re.search(r'^version = "([^"]+)"', (SOURCE / "scripts" / "pyproject.toml").read_text(), re.M).group(1)
    changelog = re.search(r"^## (\S+)", (DOCS / "CHANGELOG.md").read_text(), re.M).group(1)
    import rcsweep_tools
    program = subprocess.run([BIN, "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    assert cmake == pyproject == changelog == rcsweep_tools.__version__ == program
