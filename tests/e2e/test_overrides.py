"""Command-line overrides (docs/CONFIG.md "Overrides on the command line"): `rcsweep run` and
`rcsweep plan` take KEY=VALUE arguments after the sweep file; a run with overrides is bitwise the
run of the edited file, the store records them and `rcsweep info` prints them, and a bad override
exits with code 2 naming its key before any store is created."""
import h5py
import pytest

from conftest import assert_same_results, rcsweep

SWEEP = """
[sweep]
name = "ovr"
seed = 3
replicates = 2

[model]
T = 8
d = 16
depth = 3
mixer = "softmax"

[axes]
lambda = [0.0, 1.0]

[[zip]]
sigma_qk = [1.0, 0.5]
sigma_v = [1.0, 2.0]

[output]
spectra = "last"
"""

# The overrides and the file they make: every kind of key (a scalar of [sweep] and [model], an
# axis replaced, a [model] parameter moved to [axes], a bare word, a [[zip]] list, an [output] key).
OVERRIDES = ["sweep.replicates=3", "model.depth=4", "axes.lambda=[0,0.5,1]", "axes.d=[16,32]",
             "model.mixer=markov", "zip[0].sigma_v=[1.0,3.0]", "output.spectra=all"]
EDITED = (SWEEP.replace("replicates = 2", "replicates = 3")
          .replace("depth = 3", "depth = 4")
          .replace("d = 16\n", "")
          .replace("lambda = [0.0, 1.0]", "lambda = [0.0, 0.5, 1.0]\nd = [16, 32]")
          .replace('mixer = "softmax"', 'mixer = "markov"')
          .replace("sigma_v = [1.0, 2.0]", "sigma_v = [1.0, 3.0]")
          .replace('spectra = "last"', 'spectra = "all"'))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "sweep.toml").write_text(SWEEP)
    (tmp_path / "edited.toml").write_text(EDITED)
    return tmp_path


def test_run_with_overrides_is_bitwise_the_run_of_the_edited_file(files):
    # overrides before and after an option: all positional arguments after the sweep file count
    rcsweep("run", files / "sweep.toml", *OVERRIDES[:3], "-o", files / "over.h5", "-q", *OVERRIDES[3:],
            ranks=2, check=0)
    rcsweep("run", files / "edited.toml", "-o", files / "edited.h5", "-q", check=0)
    assert_same_results(files / "over.h5", files / "edited.h5")
    with h5py.File(files / "over.h5", "r") as a, h5py.File(files / "edited.h5", "r") as b:
        assert a.attrs["config"] == b.attrs["config"]
        assert a.attrs["plan_hash"] == b.attrs["plan_hash"]
        assert a.attrs["overrides"] == "\n".join(OVERRIDES)
        assert b.attrs["overrides"] == ""
        assert list(a["axes/lambda"][...]) == [0.0, 0.5, 1.0]
        assert list(a["axes"].attrs["order"].split(",")) == ["lambda", "d", "sigma_qk", "sigma_v"]


def test_info_prints_the_overrides(files):
    store = files / "out.h5"
    rcsweep("run", files / "sweep.toml", "model.depth=2", "axes.lambda=[0, 1]", "-o", store, "-q", check=0)
    out = rcsweep("info", store, check=0).stdout
    assert "overrides     model.depth=2 'axes.lambda=[0, 1]'\n" in out
    rcsweep("run", files / "sweep.toml", "-o", files / "plain.h5", "-q", check=0)
    assert "\noverrides " not in rcsweep("info", files / "plain.h5", check=0).stdout


def test_plan_with_overrides_shows_the_changed_task_count(files):
    plain = rcsweep("plan", files / "sweep.toml", check=0).stdout
    assert "4 x 2 replicates = 8 tasks" in plain
    out = rcsweep("plan", files / "sweep.toml", *OVERRIDES, check=0).stdout
    assert "12 x 3 replicates = 36 tasks" in out
    assert "overrides     " + " ".join(OVERRIDES) in out
    assert "layers        0..4 per task" in out
    # the suggested command repeats them, quoted for the shell
    assert "rcsweep run " + str(files / "sweep.toml") + " 'sweep.replicates=3' 'model.depth=4'" in out


def test_plan_emit_passes_the_overrides_to_the_jobs_run_command(files):
    script = rcsweep("plan", files / "sweep.toml", "model.depth=4", "axes.lambda=[0, 1]", "--emit", "slurm", "--cores", 4,
                     check=0).stdout
    assert """run "$SWEEP" 'model.depth=4' 'axes.lambda=[0, 1]' -o "$OUT\"""" in script


@pytest.mark.parametrize("override, key, phrase", [
    ("model.T=0", "model.T", "must be >= 1, got 0 (set on the command line by 'model.T=0')"),
    ("sweep.replicates=0", "sweep.replicates", "must be an integer >= 1, got 0 (set on the command line"),
    ("axes.lambda=[0,nan]", "axes.lambda[1]", "must be a finite number"),
    ("model.mixer=sofmax", "model.mixer", 'got "sofmax" (set on the command line by \'model.mixer=sofmax\')'),
    ("model.lamda=1", "model.lamda", "did you mean 'lambda'?"),
    ("zip[1].T=[8,16]", "zip[1].T", "the sweep file has 1 [[zip]] table(s)"),
    ("model.T.x=1", "model.T.x", "'model.T' is an integer, not a table"),
    ("axes.lambda=[0,1", "axes.lambda", "command-line override 'axes.lambda=[0,1': the value is not TOML"),
    ("model.T", "", "command-line override 'model.T': no '='"),
    ("=3", "", "command-line override '=3': empty key"),
    ("model..T=1", "", "empty part in the key"),
])
def test_bad_override_exits_2_naming_it_before_any_store_is_created(files, override, key, phrase):
    for cmd in (["run", files / "sweep.toml", override, "-o", files / "bad.h5"],
                ["run", files / "sweep.toml", override],  # the default store name, ovr.h5
                ["plan", files / "sweep.toml", override]):
        proc = rcsweep(*cmd, "model.depth=2", cwd=files)
        assert proc.returncode == 2, proc.stderr
        lines = [ln.removeprefix("error: ") for ln in proc.stderr.splitlines()]
        assert any(ln.startswith(f"{key}: " if key else "command-line override") and phrase in ln for ln in lines), \
            proc.stderr
    assert not (files / "bad.h5").exists() and not (files / "ovr.h5").exists()
    assert sorted(p.name for p in files.iterdir()) == ["edited.toml", "sweep.toml"]


def test_a_malformed_override_is_reported_with_every_other_problem(files):
    """Every problem at once: the malformed overrides, and the file's with the others applied."""
    proc = rcsweep("plan", files / "sweep.toml", "axes.lambda=[0,", "model.depht=3", "sweep.replicates=-1", "model.T",
                   check=2)
    lines = proc.stderr.splitlines()
    assert any(ln.startswith("error: axes.lambda: command-line override 'axes.lambda=[0,'") for ln in lines), lines
    assert any("command-line override 'model.T': no '='" in ln for ln in lines), lines
    assert "model.depht: unknown parameter 'depht', did you mean 'depth'? (set on the command line" in proc.stderr
    assert "sweep.replicates: must be an integer >= 1, got -1 (set on the command line" in proc.stderr


def test_resume_needs_the_same_sweep_after_overrides(files):
    store = files / "out.h5"
    rcsweep("run", files / "sweep.toml", "model.depth=2", "-o", store, "-q", "--shard", "0/2", check=0)
    before = store.read_bytes()
    proc = rcsweep("run", files / "sweep.toml", "model.depth=3", "-o", store, "-q")
    assert proc.returncode == 2
    assert "was made from a different sweep file or command-line overrides" in proc.stderr
    assert "the store's overrides: model.depth=2, this run's: model.depth=3), and none of its results fits" in proc.stderr
    proc = rcsweep("run", files / "sweep.toml", "-o", store, "-q")
    assert proc.returncode == 2 and "this run's: none)" in proc.stderr
    assert store.read_bytes() == before
    # the edited file is the same sweep: it resumes the store (which keeps its overrides)
    (files / "depth2.toml").write_text(SWEEP.replace("depth = 3", "depth = 2"))
    rcsweep("run", files / "depth2.toml", "-o", store, "-q", check=0)
    out = rcsweep("info", store, check=0).stdout
    assert "overrides     model.depth=2\n" in out and "100.0% finished" in out


def test_merged_store_keeps_the_overrides(files):
    shards = [files / f"s{i}.h5" for i in range(2)]
    for i, shard in enumerate(shards):
        rcsweep("run", files / "sweep.toml", "model.depth=2", "-o", shard, "-q", "--shard", f"{i}/2", check=0)
    rcsweep("merge", files / "merged.h5", *shards, check=0)
    assert "overrides     model.depth=2\n" in rcsweep("info", files / "merged.h5", check=0).stdout


@pytest.mark.parametrize("cmd", ["run", "plan"])
def test_help_explains_overrides_with_an_example(cmd):
    out = rcsweep(cmd, "--help", check=0).stdout
    for words in ("overrides", "KEY=VALUE", f"rcsweep {cmd} sweep.toml model.T=256 axes.lambda=[0,0.5,1]",
                  "zip[0]", "bare word"):
        assert words in out, f"'{words}' missing from {cmd} --help"


def test_after_the_end_of_options_marker_every_argument_is_an_override(files):
    """`--` ends the options: a run with its overrides there is the run with them anywhere, also on
    2 ranks (mpiexec started by -n passes them on), and an option there is a bad override (exit 2)."""
    rcsweep("run", files / "sweep.toml", "-o", files / "over.h5", "-q", "-n", 2, "--", *OVERRIDES, check=0)
    rcsweep("run", files / "edited.toml", "-o", files / "edited.h5", "-q", check=0)
    assert_same_results(files / "over.h5", files / "edited.h5")
    store = files / "edited.h5"
    before = (store.stat().st_ino, store.read_bytes())
    marker = files / "marker"
    for after in (["--overwrite=true"], ["--ranks=2", f"--mpiexec=touch {marker}"], ["-o", files / "other.h5"],
                  ["--help"], ["--", "model.depth=2"]):
        for cmd in ("run", "plan"):
            proc = rcsweep(cmd, files / "edited.toml", "-o", store, "-q" if cmd == "run" else "--cores=2", "--",
                           *after)
            assert proc.returncode == 2 and ("command-line override '" in proc.stderr or
                                             "unknown top-level key '--" in proc.stderr), (after, proc.stderr)
            assert proc.stdout == "", proc.stdout  # not the help
    assert (store.stat().st_ino, store.read_bytes()) == before
    assert not marker.exists() and not (files / "other.h5").exists()
    # the sweep file itself may follow `--` too (a positional argument like any other)
    out = rcsweep("plan", "--", files / "sweep.toml", "model.depth=4", check=0).stdout
    assert "layers        0..4 per task" in out


@pytest.mark.parametrize("cmd", ["run", "plan"])
def test_help_explains_the_end_of_options_marker(cmd):
    out = rcsweep(cmd, "--help", check=0).stdout
    assert f"rcsweep {cmd} sweep.toml -o out.h5 -- model.T=256 'axes.lambda=[0,1]'" in out
    assert "After `--` no argument is read as an option" in out
