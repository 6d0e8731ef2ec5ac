"""`rcsweep ls`: the stores under folders as a table, filtered with --where, while one of them is
being written, with a damaged one named and the listing going on (the catalogue itself:
tests/python/test_catalog.py)."""
import json
import subprocess
import time

from conftest import BIN, rcsweep

SWEEP = """[sweep]
name = "{name}"
seed = 5
replicates = {replicates}

[model]
mixer = "{mixer}"
depth = {depth}
T = 8
d = 8
norm = "{norm}"

[axes]
lambda = [0.0, 1.0]
"""


def make(folder, name, mixer, norm, replicates=2, depth=3):
    folder.mkdir(parents=True, exist_ok=True)
    sweep = folder / f"{name}.toml"
    sweep.write_text(SWEEP.format(name=name, mixer=mixer, norm=norm, replicates=replicates, depth=depth))
    return sweep


def test_ls_lists_and_filters_the_stores_under_folders(tmp_path):
    for sub, name, mixer, norm in (("x", "ssd_ln", "ssd", "layernorm"), ("x/y", "ssd_rms", "ssd", "rms"),
                                   ("z", "soft_ln", "softmax", "layernorm")):
        sweep = make(tmp_path / sub, name, mixer, norm)
        rcsweep("run", sweep, "-o", tmp_path / sub / f"{name}.h5", "-q", check=0)
    every = rcsweep("ls", tmp_path, check=0)
    lines = every.stdout.splitlines()
    assert lines[0].split()[:4] == ["STORE", "SWEEP", "PLAN", "AXES"]
    assert [l.split()[1] for l in lines[1:4]] == ["ssd_ln", "ssd_rms", "soft_ln"]  # folders in order
    assert "3 stores" in every.stderr
    chosen = rcsweep("ls", tmp_path, "--where", "mixer=ssd", "norm=layernorm", check=0)
    rows = chosen.stdout.splitlines()[1:]
    assert len([r for r in rows if r.startswith(str(tmp_path))]) == 1 and "ssd_ln.h5" in rows[0]
    assert "lambda=0,1" in rows[0] and "4/4 done" in rows[0]
    records = [json.loads(l) for l in rcsweep("ls", tmp_path, "--json", "--where", "norm=layernorm",
                                               check=0).stdout.splitlines()]
    assert sorted(r["sweep"] for r in records) == ["soft_ln", "ssd_ln"]
    assert all(r["fixed"]["norm"] == "layernorm" and r["axes"] == {"lambda": [0.0, 1.0]} for r in records)
    assert all(r["done"] == 4 and r["pending"] == 0 and len(r["plan_hash"]) == 16 for r in records)
    unknown = rcsweep("ls", tmp_path, "--where", "mixr=ssd", check=2)
    assert "error: --where mixr: no listed store has a parameter 'mixr'" in unknown.stderr
    # a damaged copy (cut in half) is refused by name, the others listed; exit 2
    good = tmp_path / "x" / "ssd_ln.h5"
    cut = tmp_path / "x" / "cut.h5"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    damaged = rcsweep("ls", tmp_path, check=2)
    assert f"refused {cut}: " in damaged.stderr and "3 stores; 1 refused" in damaged.stderr
    assert len(damaged.stdout.splitlines()) >= 4


def test_ls_reads_a_store_while_it_is_written(tmp_path):
    sweep = make(tmp_path, "long", "softmax", "rms", replicates=400, depth=40)
    store = tmp_path / "long.h5"
    proc = subprocess.Popen([BIN, "run", str(sweep), "-o", str(store), "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            out = rcsweep("ls", tmp_path, "--json")
            if out.returncode == 0 and out.stdout.strip():
                r = json.loads(out.stdout.splitlines()[0])
                if 0 < r["done"] < r["n_tasks"]:
                    seen = r
                    break
            time.sleep(0.05)
        assert seen is not None, "never saw the store half done"
        assert seen["finished"] == "" and seen["pending"] == seen["n_tasks"] - seen["done"] - seen["failed"]
        table = rcsweep("ls", tmp_path)  # the table of a store being written
        assert table.returncode == 0, table.stderr
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err  # the listing held nothing up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = json.loads(rcsweep("ls", store, "--json", check=0).stdout.splitlines()[0])
    assert done["done"] == 800 and done["finished"]
