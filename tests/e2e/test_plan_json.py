"""`rcsweep plan --json`: one JSON object with every number the plan's text gives (each checked
against the text's own line), the text itself, the suggested command as words, the warnings, and
with -o what a run would do with the store (start, resume, grow, refuse); bad combinations exit 2
naming the option."""
import json
import re

import pytest

from conftest import DATA, rcsweep

SMALL = """\
[sweep]
name = "pj"
seed = 3
replicates = 2

[model]
mixer = "softmax"
depth = 4

[axes]
lambda = [0.0, 1.0]

[[zip]]
T = [8, 16]
d = [16, 32]

[output]
spectra = "last"
"""


def human_bytes(n):
    """As rcsweep prints a byte count (base/units.hpp: B, KiB, MiB, GiB, TiB with one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024


def line(text, label):
    (found,) = re.findall(rf"^{re.escape(label)}\s+(.*)$", text, re.M)
    return found


def plan_both(*args):
    text = rcsweep("plan", *args, check=0).stdout
    data = json.loads(rcsweep("plan", *args, "--json", check=0).stdout)
    return text, data


def test_every_number_of_the_text_is_in_the_json(tmp_path):
    sweep = tmp_path / "pj.toml"
    sweep.write_text(SMALL)
    text, d = plan_both(sweep, "--cores", 2, "model.depth=5")
    # the text is the plan's own, and the JSON is one object (json.loads took all of stdout)
    assert d["text"] == text and d["store"] is None
    head = re.match(r'sweep "(.*)"  \(plan ([0-9a-f]{16}), seed (\d+)\)', text)
    assert (d["name"], d["plan_hash"], d["seed"]) == ("pj", head.group(2), 3)
    assert d["overrides"] == ["model.depth=5"] and line(text, "overrides") == "model.depth=5"
    assert [(g["name"], g["size"], g["params"]) for g in d["grid"]] == [("lambda", 2, ["lambda"]),
                                                                        ("zip0", 2, ["T", "d"])]
    assert d["grid"][1]["values"] == [["8", "16"], ["16", "32"]]
    points = re.match(r"(\d+) x (\d+) replicates = (\d+) tasks", line(text, "points")).groups()
    assert (d["points"], d["replicates"], d["tasks"]) == tuple(map(int, points)) == (4, 2, 8)
    assert (d["tasks_min"], d["tasks_max"], d["adaptive"]) == (8, 8, None)
    assert d["shard"] == {"index": 0, "count": 1, "tasks": 8}
    assert d["bundles"] == int(line(text, "bundles").split()[0])
    layers = re.match(r"0\.\.(\d+) per task; metrics: (\S+); spectra of X: (.*)$", line(text, "layers")).groups()
    assert (str(d["max_depth"]), d["metrics"], d["spectra"]) == layers == ("5", "all", "last layer")
    work = re.match(r"(\S+) GFLOP, about (.*) on one core", line(text, "work")).groups()
    assert f"{d['work']['gflop']:.3g}" == work[0] and d["work"]["core_seconds"] > 0
    m = d["memory"]
    assert line(text, "peak memory").startswith(human_bytes(m["peak_bytes"]) + " per rank (largest bundle "
                                                + human_bytes(m["unit_bytes"]))
    assert f"with its tasks' results {human_bytes(m['results_bytes'])}" in line(text, "peak memory")
    assert f"BLAS {human_bytes(m['blas_bytes'])}, program {human_bytes(m['program_bytes'])}" in text
    assert line(text, "address space").startswith(human_bytes(m["address_space_bytes"]) + " per rank")
    assert line(text, "memory budget") == f"{human_bytes(m['budget_per_rank_bytes'])} per rank ({m['budget_source']})"
    assert line(text, "store size") == "about " + human_bytes(d["store_bytes"])
    lay = d["layout"]
    assert line(text, "layout") == f"{lay['text']} per node: {lay['reason']}"
    assert lay["text"] == f"{lay['ranks_per_node']} ranks x {lay['threads']} thread" and lay["ranks"] == 2
    sug = d["suggested"]
    assert "suggested     " + line(text, "suggested") == sug["line"]
    assert sug["argv"] == ["mpiexec", "-n", "2", "rcsweep", "run", str(sweep), "model.depth=5", "-o", "pj.h5"]
    assert sug["line"].startswith("suggested     " + sug["command"] + "   (")
    sched = d["schedule"]
    assert re.search(rf"^ranks 2: expected utilisation {round(100 * sched['utilisation'])}% \(units: "
                     rf"{sched['units']} bundles\)$", text, re.M), text
    assert sched["text"] in text and d["warnings"] == []


def test_threads_adaptive_shard_and_warnings(tmp_path):
    sweep = tmp_path / "pj.toml"
    sweep.write_text(SMALL)
    text, d = plan_both(sweep, "--cores", 8, "--threads", 2, "--shard", "1/2")
    assert d["layout"]["threads"] == 2 and d["shard"] == {"index": 1, "count": 2, "tasks": 4}
    assert "(shard 1/2: 4 tasks)" in text
    assert d["suggested"]["argv"][:10] == ["mpiexec", "-n", "4", "--map-by", "slot:PE=2", "-x", "OMP_PLACES=cores",
                                           "-x", "OMP_PROC_BIND=close", "rcsweep"]
    # each warning is a line of the text (this 2-core machine has fewer cores than 4 ranks x 2 threads)
    assert d["warnings"] and all(f"warning       {w}" in text for w in d["warnings"])
    _, a = plan_both(DATA / "adaptive.toml")
    assert a["adaptive"]["min"] < a["adaptive"]["max"] == a["replicates"]
    assert a["tasks_min"] == a["points"] * a["adaptive"]["min"] and a["tasks_max"] == a["tasks"]
    assert a["work"]["core_seconds_min"] <= a["work"]["core_seconds"]
    assert f"{a['work']['gflop_min']:.3g} to {a['work']['gflop']:.3g} GFLOP" in a["text"]


def test_the_store_outlook_is_its_last_member(tmp_path):
    sweep = tmp_path / "pj.toml"
    sweep.write_text(SMALL)
    store = tmp_path / "pj.h5"
    _, new = plan_both(sweep, "-o", store)
    assert new["store"] == {"path": str(store), "action": "start", "text": f"{store} does not exist: a run starts it"}
    rcsweep("run", sweep, "-o", store, "-q", check=0)
    text, same = plan_both(sweep, "-o", store)
    assert same["store"]["action"] == "resume" and (same["store"]["tasks_left"], same["store"]["tasks"]) == (0, 8)
    assert f"store         {same['store']['text']}\n" in text and text.startswith(same["text"] + "store         ")
    _, grown = plan_both(sweep, "-o", store, "sweep.replicates=3")
    assert grown["store"]["action"] == "grow"
    assert (grown["store"]["copied"], grown["store"]["computed"]) == (8, 4)
    assert "sweep.replicates: 2 -> 3" in grown["store"]["text"]
    _, other = plan_both(sweep, "-o", store, "sweep.seed=4")
    assert other["store"]["action"] == "refuse"
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5")
    _, bad = plan_both(sweep, "-o", junk)
    assert bad["store"]["action"] == "refuse" and "a run refuses it" in bad["store"]["text"]


@pytest.mark.parametrize("args,key", [(["--json", "--emit", "slurm", "--cores", "2"], "--json")])
def test_json_is_refused_with_emit(args, key, tmp_path):
    sweep = tmp_path / "pj.toml"
    sweep.write_text(SMALL)
    proc = rcsweep("plan", sweep, *args, check=2)
    assert key in proc.stderr and proc.stdout == ""
