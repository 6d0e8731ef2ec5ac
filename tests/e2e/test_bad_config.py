"""Bad sweep files (docs/CONFIG.md "Validation", docs/ERRORS.md): `rcsweep run` and `rcsweep plan`
exit with code 2, name every problem as `key: problem` with its exact key path and message, and
write nothing (no store, not even the default `<name>.h5`)."""
import h5py
import numpy as np
import pytest

from conftest import rcsweep

GOOD = """
[sweep]
name = "bad"
seed = 1
replicates = 2
[model]
T = 8
d = 16
depth = 3
[axes]
lambda = [0.0, 1.0]
[output]
spectra = "none"
"""


def model(extra):
    """GOOD with `extra` lines appended to [model]."""
    return lambda s: s.replace("depth = 3", "depth = 3\n" + extra)


def output(extra):
    """GOOD with `extra` lines appended to [output]."""
    return lambda s: s.replace('spectra = "none"', 'spectra = "none"\n' + extra)


def small(T, d, extra):
    """GOOD with T and d replaced and `extra` lines appended to [model]."""
    return lambda s: model(extra)(s.replace("T = 8", f"T = {T}").replace("d = 16", f"d = {d}"))


def input_files(folder):
    """Input files next to the sweep file: a 3 x 2 matrix, a vector, a NaN matrix, a non-HDF5 file."""
    with h5py.File(folder / "emb.h5", "w") as f:
        f["X"] = np.ones((3, 2))
        f["v"] = np.ones(5)
        f["n"] = np.full((8, 16), np.nan)
    (folder / "text.h5").write_text("not HDF5\n")


# (id, transformation of GOOD, [(key, phrase of its message)], setup of extra files or None).
# Every (key, phrase) must appear on one stderr line "key: ...phrase..."; key "" matches any line.
CASES = [
    ("TOML syntax error", lambda s: s.replace("seed = 1", "seed = = 1"),
     [("", "TOML syntax error in bad.toml at line 4, column 8")], None),
    ("unclosed table header", lambda s: s.replace("[axes]", "[axes"),
     [("", "TOML syntax error in bad.toml at line 10")], None),
    ("unknown model key with suggestion", model("lamda = 1.0"),
     [("model.lamda", "unknown parameter 'lamda', did you mean 'lambda'?")], None),
    ("unknown table", lambda s: s + "\n[modle]\nT = 3\n",
     [("modle", "unknown table [modle], did you mean 'model'?")], None),
    ("unknown sweep key", lambda s: s.replace("seed = 1", "seed = 1\nseeds = 3"),
     [("sweep.seeds", "unknown key 'seeds' in [sweep], did you mean 'seed'?")], None),
    ("unknown top-level key", lambda s: "title = 1\n" + s,
     [("title", "unknown top-level key 'title'")], None),
    ("unknown output key", output('spectrum = "all"'),
     [("output.spectrum", "unknown key 'spectrum' in [output], did you mean 'spectra'?")], None),
    ("string for an integer", lambda s: s.replace("T = 8", 'T = "eight"'),
     [("model.T", 'must be an integer, got a string "eight"')], None),
    ("float for an integer", lambda s: s.replace("T = 8", "T = 8.0"),
     [("model.T", "must be an integer (write 8, not 8.0)")], None),
    ("integer for the name", lambda s: s.replace('name = "bad"', "name = 5"),
     [("sweep.name", "must be a string, got an integer")], None),
    ("empty name", lambda s: s.replace('name = "bad"', 'name = ""'), [("sweep.name", "must not be empty")], None),
    ("negative seed", lambda s: s.replace("seed = 1", "seed = -1"),
     [("sweep.seed", "must be a non-negative integer, got -1")], None),
    ("zero replicates", lambda s: s.replace("replicates = 2", "replicates = 0"),
     [("sweep.replicates", "must be an integer >= 1, got 0")], None),
    ("negative width", lambda s: s.replace("d = 16", "d = -4"), [("model.d", "must be >= 1, got -4")], None),
    ("width above int32", lambda s: s.replace("d = 16", "d = 4294967296"),
     [("model.d", 'must be <= 32768, got 4294967296 (docs/CONFIG.md "Limits")')], None),
    ("depth of 2^31 - 1 layers", lambda s: s.replace("depth = 3", "depth = 2147483647"),
     [("model.depth", 'must be <= 100000, got 2147483647 (docs/CONFIG.md "Limits")')], None),
    ("counts above their bounds", model("heads = 257\nmlp_ratio = 65\nstate_dim = 32769\nd_qk = 32769"),
     [("model.heads", "must be <= 256, got 257"), ("model.mlp_ratio", "must be <= 64, got 65"),
      ("model.state_dim", "must be <= 32768, got 32769"), ("model.d_qk", "must be <= 32768, got 32769")], None),
    ("a swept depth above the bound", lambda s: s.replace("depth = 3\n", "").replace("[axes]", "[axes]\ndepth = [3, 100001]"),
     [("axes.depth[1]", "must be <= 100000, got 100001")], None),
    ("more per-layer rows than a store holds",
     lambda s: s.replace("depth = 3", "depth = 100000").replace("replicates = 2", "replicates = 1343"),
     [("model.depth", "2686 tasks x 100001 layers (0..100000) is 268602686 rows of per-layer metrics, more than "
                      'the 268435456 a store holds (docs/CONFIG.md "Limits")')], None),
    ("more spectra than a sweep may store",
     lambda s: (s.replace("depth = 3", "depth = 100000").replace("replicates = 2", "replicates = 336")
                .replace('spectra = "none"', 'spectra = "all"')),
     [("output.spectra", "singular values of X: 672 tasks x 100001 layers is 67200672 spectra, more than the "
                         "67108864 a sweep may store")], None),
    ("more spectrum values than a store holds",
     lambda s: (s.replace("depth = 3", "depth = 40000").replace("T = 8", "T = 32768").replace("d = 16", "d = 32768")
                .replace('spectra = "none"', 'spectra = "all"\nmixer_spectra = "all"')),
     [("output.spectra", "singular values of X: 4 tasks x 40001 layers x min(T, d) is 5243011072 values, more "
                         "than the 4294967296 a store holds in one dataset"),
      ("output.mixer_spectra", "mixer spectra: 4 tasks x 40000 layers x T is 5242880000 values")], None),
    ("more gradient norms than a store holds",
     lambda s: s.replace("depth = 3", "depth = 40000") + 'gradients = "all"\n',
     [("output.gradients", "gradient norms: 4 tasks x 40000 layers x 40000 output depths is 6400000000 values, "
                           "more than the 4294967296 a store holds in one dataset")], None),
    ("sigma_A zero", model("sigma_A = 0.0"), [("model.sigma_A", "must be > 0, got 0.0")], None),
    ("collapse rate outside (0, 1)", model("collapse_rate = 1.5"),
     [("model.collapse_rate", "must be in (0, 1), got 1.5")], None),
    ("unknown scale keyword", model('sigma_qk = "inv_sqrt_T"'),
     [("model.sigma_qk", 'must be a positive number or "inv_sqrt_d", got "inv_sqrt_T"')], None),
    ("misspelt choice", model('mixer = "softmx"'),
     [("model.mixer", 'must be one of "softmax", "markov"'), ("model.mixer", 'got "softmx"')], None),
    ("non-finite axis value", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = [0.0, nan]"),
     [("axes.lambda[1]", "must be a finite number, got nan")], None),
    ("empty axis", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = []"),
     [("axes.lambda", "empty list: give at least one value")], None),
    ("axis that is not a list", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = 0.5"),
     [("axes.lambda", "must be a list (array) of values, got a float 0.5")], None),
    ("list under [model]", lambda s: s.replace("T = 8", "T = [8]"),
     [("model.T", "[model] takes one value; to sweep 'T' list its values under [axes]")], None),
    ("duplicate axis value", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = [0.0, 1.0, 0.0]"),
     [("axes.lambda[2]", "duplicate value 0 (same as [0]): it would create identical grid points")], None),
    ("parameter in model and axes", model("lambda = 0.5"),
     [("axes.lambda", "parameter 'lambda' is given in both model and axes; give it in one place only")], None),
    ("parameter in two zips", lambda s: s + "\n[[zip]]\nsigma_v = [1.0, 2.0]\n[[zip]]\nsigma_v = [3.0]\n",
     [("zip[1].sigma_v", "given in both zip[0] and zip[1]")], None),
    ("zip lists of unequal length", lambda s: s + "\n[[zip]]\nsigma_v = [1.0, 2.0]\nsigma_qk = [1.0]\n",
     [("zip[0]", "lists of unequal length (sigma_v has 2, sigma_qk has 1)")], None),
    ("duplicate zip entry", lambda s: s + "\n[[zip]]\nsigma_v = [1.0, 2.0, 1.0]\nsigma_qk = [1.0, 2.0, 1.0]\n",
     [("zip[0]", "entry 2 repeats entry 0: it would create identical grid points")], None),
    ("depth in a zip", lambda s: s + "\n[[zip]]\ndepth = [1, 2]\nsigma_v = [1.0, 2.0]\n",
     [("zip[0].depth", "depth is not a task dimension")], None),
    ("missing T", lambda s: s.replace("T = 8\n", ""),
     [("model.T", "required parameter 'T' is missing: give it under [model] or [axes]")], None),
    ("missing [sweep]", lambda s: s.replace('[sweep]\nname = "bad"\nseed = 1\nreplicates = 2\n', ""),
     [("sweep.name", 'required: a [sweep] table with name = "..."')], None),
    ("orthonormal input with T > d", lambda s: s.replace("T = 8", "T = 32"),
     [("model.input", '"orthonormal" needs T <= d (orthonormal rows), but T = 32 > d = 16; at 2 of 2 grid points')],
     None),
    ("swept T > d at some points", lambda s: s.replace("T = 8\n", "").replace("[axes]", "[axes]\nT = [8, 32]"),
     [("axes.T", "needs T <= d (orthonormal rows), but T = 32 > d = 16; at 2 of 4 grid points, e.g. point 2")],
     None),
    ("outliers_r not below T", model('gap_fix = "outliers"\noutliers_r = 8'),
     [("model.outliers_r", "must be < T = 8 (0 = argmax gap), got 8")], None),
    ("adaptive replicates: min above max, unknown metric, layer beyond the depth",
     lambda s: s.replace("replicates = 2\n", "") + (
         "[sweep.replicates]\nmin = 9\nmax = 4\nstep = 2\n"
         'targets = [{ metric = "sr_cv", rel_se = 0.1 }, { metric = "mu", layer = 7, abs_se = 0.1 }]\n'),
     [("sweep.replicates.min", "must be <= max (4), got 9"),
      ("sweep.replicates.targets[0].metric", "did you mean 'sr_cov'?")], None),
    ("adaptive replicates: a target layer beyond the depth",
     lambda s: s.replace("replicates = 2\n", "") + (
         "[sweep.replicates]\nmin = 2\nmax = 4\nstep = 2\n"
         'targets = [{ metric = "mu", layer = 7, abs_se = 0.1 }]\n'),
     [("sweep.replicates.targets[0].layer", "is 7, beyond the sweep's depth 3")], None),
    ("too many tasks", lambda s: s.replace("replicates = 2", "replicates = 600000"),
     [("sweep.replicates", "2 points x 600000 replicates is more than 1000000 tasks")], None),
    ("more replicates than tasks", lambda s: s.replace("replicates = 2", "replicates = 1000001"),
     [("sweep.replicates", "must be <= 1000000, got 1000001")], None),
    ("matrix input of the wrong shape", small(2, 3, 'input = "matrix"\ninput_matrix = [[1.0, 0.0], [0.0, 1.0]]'),
     [("model.input_matrix", "is 2 x 2 (rows x columns) but must be T x d = 2 x 3")], None),
    ("ragged matrix", small(2, 3, 'input = "matrix"\ninput_matrix = [[1.0, 0.0, 1.0], [0.0, 1.0]]'),
     [("model.input_matrix[1]", "row 1 has 2 numbers but row 0 has 3")], None),
    ("matrix mixer without its matrix", small(2, 2, 'mixer = "matrix"'),
     [("model.mixer_matrix", 'required with mixer = "matrix"')], None),
    ("matrix no point uses", model("mixer_matrix = [[1.0]]"),
     [("model.mixer_matrix", 'is only used with mixer = "matrix", but mixer is never "matrix"')], None),
    ("swept matrix", lambda s: s.replace("lambda = [0.0, 1.0]", "lambda = [0.0, 1.0]\ninput_matrix = [[1.0]]"),
     [("axes.input_matrix", "'input_matrix' is not sweepable: give it once under [model]")], None),
    ("missing input file", model('input = "file"\ninput_path = "nope.h5"'),
     [("model.input_path", "input file 'nope.h5' does not exist")], None),
    ("input file that is not HDF5", model('input = "file"\ninput_path = "text.h5"'),
     [("model.input_path", "input file 'text.h5' is not an HDF5 file")], input_files),
    ("input file without the dataset", model('input = "file"\ninput_path = "emb.h5"\ninput_dataset = "Y"'),
     [("model.input_path", "input file 'emb.h5' has no dataset 'Y'")], input_files),
    ("input dataset of rank 1", model('input = "file"\ninput_path = "emb.h5"\ninput_dataset = "v"'),
     [("model.input_path", "dataset 'v' in input file 'emb.h5' has rank 1 (5), expected a 2-D T x d matrix")],
     input_files),
    ("input dataset of the wrong shape", model('input = "file"\ninput_path = "emb.h5"'),
     [("model.input_path", "dataset 'X' of 'emb.h5' is 3 x 2 (rows x columns) but must be T x d = 8 x 16")],
     input_files),
    ("input dataset with NaN", model('input = "file"\ninput_path = "emb.h5"\ninput_dataset = "n"'),
     [("model.input_path", "dataset 'n' in input file 'emb.h5' has a non-finite value at [0, 0]")], input_files),
    ("bad spectra", lambda s: s.replace('spectra = "none"', 'spectra = "some"'),
     [("output.spectra", 'must be one of "none", "last", "all", got a string "some"')], None),
    ("bad gradients", output('gradients = "every"'),
     [("output.gradients", 'must be one of "none", "last", "all", got a string "every"')], None),
    ("bad grad_method", output('gradients = "last"\ngrad_method = "exakt"'),
     [("output.grad_method", 'must be one of "auto", "exact", "hutchinson", got a string "exakt"')], None),
    ("grad_probes below 2", output('gradients = "last"\ngrad_probes = 1'),
     [("output.grad_probes", "must be an integer from 2 to 100000 (Hutchinson probes per task), got an integer 1")],
     None),
    ("exact gradients of a non-linear stack", output('gradients = "last"\ngrad_method = "exact"'),
     [("output.grad_method", '"exact" needs a linear stack'), ("output.grad_method", "at 2 of 2 grid points")],
     None),
    ("name with a slash", lambda s: s.replace('name = "bad"', 'name = "../escaped"'),
     [("sweep.name", "must be a plain file name (the default store is <name>.h5): no '/', got \"../escaped\"")],
     None),
    ("name '..'", lambda s: s.replace('name = "bad"', 'name = ".."'),
     [("sweep.name", "must be a plain file name (the default store is <name>.h5): not '.' or '..', got \"..\"")],
     None),
    ("name with a leading '-'", lambda s: s.replace('name = "bad"', 'name = "-o"'),
     [("sweep.name", "no leading '-' (it would read as an option), got \"-o\"")], None),
    ("name with a NUL", lambda s: s.replace('name = "bad"', 'name = "a\\u0000b"'),
     [("sweep.name", 'no control characters (NUL, tab, line breaks, ...), got "a\\u0000b"')], None),
    ("name too long", lambda s: s.replace('name = "bad"', f'name = "{"n" * 201}"'),
     [("sweep.name", "must be at most 200 bytes long, got 201")], None),
    ("keys and values with a NUL, shown escaped, nothing cut",
     model('"lam\\u0000bda" = 1\nmixer = "soft\\u0000max"\n"x\\u001b[31m" = 2'),
     [("model.lam\\x00bda", "unknown parameter 'lam\\x00bda', did you mean 'lambda'?"),
      ("model.mixer", 'got "soft\\u0000max"'),
      ("model.x\\x1B[31m", "unknown parameter 'x\\x1B[31m'")], None),
    ("input path with a NUL", model('input = "file"\ninput_path = "emb.h5\\u0000.txt"'),
     [("model.input_path", 'must not hold a NUL character, got "emb.h5\\u0000.txt"')], input_files),
    ("key of a megabyte, cut in the message", model("k" * 1000000 + " = 1"),
     [(("model." + "k" * 1000000)[:200] + "... (1000006 bytes)", "unknown parameter 'kkkk")], None),
    ("table header of 50000 dotted parts", lambda s: s + "[" + ".".join(["a"] * 50000) + "]\nx = 1\n",
     [("", "TOML nesting too deep in bad.toml at line 14, column 129: more than 64 levels of tables, dotted key "
           "parts, arrays and inline tables (a sweep file needs about 5)")], None),
    ("dotted key of 50000 parts", model(".".join(["a"] * 50000) + " = 1"),
     [("", "TOML nesting too deep in bad.toml at line 10, column 126: more than 64 levels")], None),
    ("arrays nested 30000 deep", model("x = " + "[" * 30000 + "]" * 30000),
     [("", "TOML nesting too deep in bad.toml at line 10, column 67: more than 64 levels")], None),
    ("inline tables nested 30000 deep", model("x = " + "{a = " * 30000 + "1" + "}" * 30000),
     [("", "TOML nesting too deep in bad.toml at line 10, column ")], None),
    ("several problems at once",
     lambda s: (s.replace("T = 8", 'T = "x"').replace("replicates = 2", "replicates = 0")
                .replace("lambda = [0.0, 1.0]", 'lambda = [0.0, inf]\nnorm = ["rms", "l2"]')
                .replace('spectra = "none"', 'spectra = "x"\ngrad_probes = 0')),
     [("sweep.replicates", "must be an integer >= 1, got 0"),
      ("model.T", 'must be an integer, got a string "x"'),
      ("axes.lambda[1]", "must be a finite number, got inf"),
      ("axes.norm[1]", 'must be one of "none", "rms", "layernorm", got "l2"'),
      ("output.spectra", 'got a string "x"'),
      ("output.grad_probes", "got an integer 0")], None),
    ("mamba2 with layernorm", model('block = "mamba2"\nmodel_folder = "m"\nnorm = "layernorm"'),
     [("model.norm", '"layernorm" is not a norm of the Mamba-2 block: "rms" keeps its RMSNorms')], None),
    ("mamba2 with an MLP and a mask", model('block = "mamba2"\nmodel_folder = "m"\nmlp = "relu"\nmask = "causal"'),
     [("model.mlp", "the Mamba-2 block has no MLP"),
      ("model.mask", 'has no meaning with block = "mamba2" (the SSD is causal already)')], None),
    ("mamba2 without its model folder", model('block = "mamba2"'),
     [("model.model_folder", 'required with block = "mamba2": the model folder')], None),
    ("gated_norm off at a stack point", model("gated_norm = false"),
     [("model.gated_norm", 'false (the Mamba-2 block\'s gated RMSNorm off) is only used with block = "mamba2", '
                           'but block is "stack" here')], None),
]
assert len({c[0] for c in CASES}) == len(CASES) >= 20

# `run` with -o, `run` with the default output <name>.h5, and `plan`.
COMMANDS = {"run": ["run", "bad.toml", "-o", "out.h5"], "run-default-output": ["run", "bad.toml"],
            "plan": ["plan", "bad.toml"]}


def message_lines(stderr):
    """The `key: problem` lines of stderr (`plan` prefixes the first with `error: `)."""
    return [line.removeprefix("error: ") for line in stderr.splitlines()]


def assert_reported(stderr, key, phrase):
    lines = message_lines(stderr)
    hits = [line for line in lines if (not key or line.startswith(key + ": ")) and phrase in line]
    assert hits, f"no line '{key}: ...{phrase}...' in stderr:\n{stderr}"


@pytest.mark.parametrize("name,transform,expects,setup", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_config_exit_2_names_key_writes_nothing(tmp_path, name, transform, expects, setup, command):
    if setup:
        setup(tmp_path)
    text = transform(GOOD)
    assert text != GOOD, "the transformation changed nothing"
    (tmp_path / "bad.toml").write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = rcsweep(*COMMANDS[command], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    for key, phrase in expects:
        assert_reported(proc.stderr, key, phrase)
    # Only the listed problems, one line each (run adds an "invalid sweep file" header line).
    lines = [line for line in message_lines(proc.stderr) if not line.startswith("invalid sweep file")]
    assert len(lines) == len({key for key, _ in expects}), proc.stderr
    assert proc.stdout == ""  # plan prints no table for a bad file
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no store, no other file


def test_good_file_passes_so_the_cases_test_their_change(tmp_path):
    (tmp_path / "good.toml").write_text(GOOD)
    proc = rcsweep("plan", "good.toml", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "2 x 2 replicates = 4 tasks" in proc.stdout


def test_bad_config_under_mpi_reports_once(tmp_path):
    sweep = tmp_path / "bad.toml"
    sweep.write_text(GOOD.replace("T = 8", "T = -1"))
    proc = rcsweep("run", sweep, "-o", tmp_path / "o.h5", ranks=2)
    assert proc.returncode == 2
    assert proc.stderr.count("model.T: must be >= 1, got -1") == 1
    assert not (tmp_path / "o.h5").exists()


def test_bad_command_line_values(tmp_path):
    from conftest import DATA
    proc = rcsweep("run", DATA / "kill.toml", "--shard", "2/2", "-o", tmp_path / "x.h5")
    assert proc.returncode == 2 and "--shard: expected i/n with 0 <= i < n, got '2/2'" in proc.stderr
    proc = rcsweep("run", DATA / "kill.toml", "--blas-threads", "0")
    assert proc.returncode == 2 and "--blas-threads" in proc.stderr
    proc = rcsweep("run", tmp_path / "missing.toml")
    assert proc.returncode == 2 and "missing.toml" in proc.stderr
    proc = rcsweep("plan", tmp_path / "missing.toml")
    assert proc.returncode == 2 and "missing.toml" in proc.stderr
    assert not (tmp_path / "x.h5").exists()


# Sweep files that are not regular files (docs/CONFIG.md "Limits"): refused at once with exit 2, the
# path and the problem, before anything is read from them (a FIFO would block a reader for ever).
def hostile_paths(folder):
    """(id, path as given, phrase of the message) for files that cannot be sweep files."""
    import os
    os.mkfifo(folder / "pipe.toml")
    (folder / "loop_a.toml").symlink_to(folder / "loop_b.toml")
    (folder / "loop_b.toml").symlink_to(folder / "loop_a.toml")
    (folder / "to_pipe.toml").symlink_to(folder / "pipe.toml")
    (folder / "sub").mkdir()
    with open(folder / "huge.toml", "wb") as f:  # sparse: 16 MiB + 1 byte of zeros
        f.truncate(16 * 1024 * 1024 + 1)
    return [
        ("fifo", "pipe.toml", "'pipe.toml': it is a FIFO (named pipe), not a regular file"),
        ("symlink to a fifo", "to_pipe.toml", "'to_pipe.toml': it is a FIFO (named pipe), not a regular file"),
        ("symlink loop", "loop_a.toml", "'loop_a.toml': too many levels of symbolic links"),
        ("name too long", "x" * 300 + ".toml", "'" + "x" * 300 + ".toml': the name is too long"),
        ("directory", "sub", "'sub': it is a directory"),
        ("device", "/dev/zero", "'/dev/zero': it is a character device, not a regular file"),
        ("larger than 16 MiB", "huge.toml",
         "'huge.toml': it has 16777217 bytes, more than the 16 MiB (16777216 bytes) a sweep file may have"),
        ("missing", "missing.toml", "'missing.toml': no such file"),
    ]


@pytest.mark.parametrize("command", ["run", "run-default-output", "plan"])
def test_sweep_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, command):
    cases = hostile_paths(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for name, path, phrase in cases:
        args = {"run": ["run", path, "-o", "out.h5"], "run-default-output": ["run", path],
                "plan": ["plan", path]}[command]
        proc = rcsweep(*args, cwd=tmp_path, timeout=10)
        assert proc.returncode == 2, (name, proc.stderr)
        assert f"error: sweep: cannot read sweep file {phrase}" in proc.stderr, (name, proc.stderr)
        assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no store, no other file


def test_name_never_becomes_a_path_outside_the_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for name in ("../escaped", "/tmp/escaped", "..", "-escaped"):
        (work / "bad.toml").write_text(GOOD.replace('name = "bad"', f'name = "{name}"'))
        for args in (["run", "bad.toml"], ["plan", "bad.toml", "--emit", "slurm"]):
            proc = rcsweep(*args, cwd=work, timeout=30)
            assert proc.returncode == 2, (name, proc.stderr)
            assert "sweep.name: must be a plain file name (the default store is <name>.h5)" in proc.stderr
            assert proc.stdout == ""
        assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
        assert sorted(p.name for p in work.iterdir()) == ["bad.toml"]


# Overrides nested too deep (docs/CONFIG.md "Limits"): the list reader and toml++ recursed once per
# level and overflowed the stack. Refused with the override's key, its text cut short, at once.
DEEP_OVERRIDES = [
    ("lists 30000 deep", "axes.lambda=" + "[" * 30000 + "]" * 30000,
     "axes.lambda: command-line override 'axes.lambda=[[[[", "... (60012 characters)': the value nests deeper "
     "than 64 levels (with the key's parts) at character 63: arrays, inline tables and dotted keys"),
    ("bare-word lists 30000 deep", "axes.gap_fix=" + "[" * 30000 + "none" + "]" * 30000,
     "axes.gap_fix: command-line override 'axes.gap_fix=[[[[", "the value nests deeper than 64 levels"),
    ("inline table of a 3000-part key", "model.x={" + ".".join(["a"] * 3000) + "=1}",
     "model.x: command-line override 'model.x={a.a.a", "the value nests deeper than 64 levels"),
    ("key of 30000 parts", ".".join(["a"] * 30000) + "=1",
     "command-line override 'a.a.a.a", "... (60001 characters)': the key has more than 64 parts (tables and indices)"),
]


@pytest.mark.parametrize("name,override,start,phrase", DEEP_OVERRIDES, ids=[c[0] for c in DEEP_OVERRIDES])
def test_override_nested_too_deep_is_refused_at_once(tmp_path, name, override, start, phrase):
    (tmp_path / "good.toml").write_text(GOOD)
    for args in (["run", "good.toml", override], ["plan", "good.toml", override]):
        proc = rcsweep(*args, cwd=tmp_path, timeout=10)
        assert proc.returncode == 2, proc.stderr[:2000]
        lines = message_lines(proc.stderr)
        hits = [line for line in lines if line.startswith(start) and phrase in line]
        assert len(hits) == 1 and len(hits[0]) < 400, proc.stderr[:2000]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.toml"]


def test_plan_at_the_bounds_returns_in_seconds(tmp_path):
    """The largest accepted depth with the most tasks the store's rows allow, every output stored at
    the last layer: `plan` walks every task's layers and must still answer at once."""
    text = (GOOD.replace("depth = 3", "depth = 100000").replace("replicates = 2", "replicates = 1342")
            .replace('spectra = "none"', 'spectra = "last"\nmixer_spectra = "last"\ngradients = "last"'))
    (tmp_path / "edge.toml").write_text(text)
    proc = rcsweep("plan", "edge.toml", "--mem-per-node", "1T", cwd=tmp_path, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "2 x 1342 replicates = 2684 tasks" in proc.stdout and "layers        0..100000 per task" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edge.toml"]


def test_store_path_that_cannot_be_looked_at_is_refused(tmp_path):
    """-o through a symbolic link loop or with a too-long name: exit 2 on --output (it was a
    filesystem_error, exit 1), before any work."""
    (tmp_path / "good.toml").write_text(GOOD)
    (tmp_path / "loop_a.h5").symlink_to(tmp_path / "loop_b.h5")
    (tmp_path / "loop_b.h5").symlink_to(tmp_path / "loop_a.h5")
    before = sorted(p.name for p in tmp_path.iterdir())
    long_name = "s" * 300 + ".h5"
    for store, problem in [("loop_a.h5", "Too many levels of symbolic links"), (long_name, "File name too long")]:
        for command in ("run", "plan"):
            proc = rcsweep(command, "good.toml", "-o", store, cwd=tmp_path, timeout=30)
            assert proc.returncode == 2, (store, proc.stderr)
            assert f"error: --output: {store}: {problem}" in proc.stderr, proc.stderr
            assert "layout" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_file_of_many_problems_lists_the_first_hundred_at_once(tmp_path):
    """200 000 unknown keys (2 MB): the first 100 problems and a count of the rest, in seconds."""
    keys = "".join(f"k{i} = 1\n" for i in range(200000))
    (tmp_path / "bad.toml").write_text(GOOD.replace("depth = 3", "depth = 3\n" + keys))
    for command in ("run", "plan"):
        proc = rcsweep(command, "bad.toml", cwd=tmp_path, timeout=20)
        assert proc.returncode == 2, proc.stderr[-2000:]
        lines = [line for line in message_lines(proc.stderr) if not line.startswith("invalid sweep file")]
        assert len(lines) == 101, len(lines)
        assert lines[0] == "model.k0: unknown parameter 'k0'" and lines[99].startswith("model.k99: ")
        assert lines[100] == "and 199900 more problems: only the first 100 are listed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]
