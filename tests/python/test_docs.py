"""Docs that cannot drift: the README's "Using it" block runs as written; docs/SCHEMA.md names every
dataset and every /points field of a real store; docs/CONFIG.md's parameter table has the engine's
parameters in registry order, with its defaults and its choices; every cross-reference of the docs
and of the comments (`NAME.md`, `NAME.md "Section"`, `NAME.md#anchor`, file paths, markdown links)
names a file and a heading of the repository; src/ keeps docs/ARCHITECTURE.md's include rules."""
import functools
import os
import re
import subprocess
import tempfile

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
    # the latest version's heading (changes not yet released sit above it under "## Unreleased")
    changelog = re.search(r"^## (?!Unreleased$)(\S+)", (DOCS / "CHANGELOG.md").read_text(), re.M).group(1)
    import rcsweep_tools
    program = subprocess.run([BIN, "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    assert cmake == pyproject == changelog == rcsweep_tools.__version__ == program


# Cross-references: every `NAME.md`, `NAME.md "Section"`, `NAME.md#anchor`, file path and markdown link
# in the README, docs/*.md and the files of src/, tests/, bench/ and scripts/ points inside the repository.
REF_DIRS = ("src", "tests", "bench", "scripts")
ROOT = SOURCE.resolve()
TEXT_SUFFIXES = {".cpp", ".hpp", ".py", ".sh", ".md", ".txt", ".toml", ".cmake", ".supp", ".dict"}
# A relative path that climbs out of its folder ("../x/y.txt"): it must stay inside the repository.
CLIMBING = re.compile(r"(?<![\w.])((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")
MD_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*)([A-Za-z][\w-]*\.md)\b")
SECTION = re.compile(r"\b([A-Z][A-Z_]*\.md)(?:\]\([\w./-]*\.md\)|\))?,?\s+\"([^\"]{1,120})\"")
ANCHOR = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Za-z][\w-]*\.md)#([\w-]+)|\]\(#([\w-]+)\)")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
COMMENT_LEAD = re.compile(r"\n[ \t]*(?://+|#+|\*)?[ \t]*")
# A file path from the repository's root or from src/ (`src/plan/plan.cpp`, `plan/schedule.hpp`,
# `src/models/s4d.{hpp,cpp}`), with an extension: placeholders and build products have none.
PATH_TOP = "src|docs|tests|bench|scripts|jobs|cmake|base|rng|linalg|metrics|config|plan|models|store|sweep|cli"
FILE_PATH = re.compile(rf"(?<![\w./$<{{-])((?:{PATH_TOP})/[\w.+{{}},/-]*"
                       r"(?:\.(?:md|hpp|cpp|py|sh|toml|txt|cmake|in|json|dict|supp|h5)|\.\{[\w,]+\}))(?![\w.])")


def reference_files():
    """(path, text) of the files whose references are checked; test_docs.py itself names bad ones."""
    files = [SOURCE / "README.md", *sorted(DOCS.glob("*.md"))]
    for top in REF_DIRS:
        for path in sorted((SOURCE / top).rglob("*")):
            if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in ("CMakeLists.txt", "rcsweep-plot")) \
                    and path.name != "test_docs.py" and "corpus" not in path.parts:
                files.append(path)
    return [(p, p.read_text(errors="replace")) for p in files]


def strip_md(text):
    return re.sub(r"\s+", " ", re.sub(r"[`*_]", "", text)).strip()


@functools.lru_cache(maxsize=None)
def headings(path):
    """The headings of a markdown file (fenced code skipped), as text and as GitHub anchors."""
    titles, anchors, fenced = [], set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip()
            titles.append(strip_md(title))
            slug = re.sub(r"[^\w\- ]", "", title.lower().replace("`", "")).replace(" ", "-")
            n = 0
            while (slug if n == 0 else f"{slug}-{n}") in anchors:
                n += 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return titles, anchors


def resolve_md(prefix, name, here):
    """The markdown file a reference names: a path from the repository's root or from the citing
    file's folder, or a bare NAME.md in docs/ or at the top level."""
    candidates = [SOURCE / prefix / name, here / prefix / name] if prefix else \
        [here / name, DOCS / name, SOURCE / name]
    for c in candidates:
        c = c.resolve()
        if c.is_file() and c.is_relative_to(SOURCE.resolve()):
            return c
    return None


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    return [path] if not m else \
        [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


SHARED_FOLDERS = {"/", "/tmp", "/var/tmp", tempfile.gettempdir()}


def reference_problems(path, text):
    here = path.parent
    joined = COMMENT_LEAD.sub(" ", text)  # a quoted section may run over a comment's line break
    where = path.relative_to(SOURCE)
    # Nothing names a place outside the checkout: a path that climbs out of it, or one under the
    # folder that holds it (this machine's layout, which a user's clone does not have).
    outside = [m.group(1) for m in CLIMBING.finditer(text) if ROOT not in (here / m.group(1)).resolve().parents]
    # (Not when the checkout lies in a shared folder such as /tmp, which the docs name as scratch.)
    parent = str(ROOT.parent)
    if parent not in SHARED_FOLDERS and parent + "/" in text:
        outside.append(parent + "/...")
    problems = [f"{where}: names a path outside the repository: {o!r}" for o in outside]
    for m in MD_NAME.finditer(text):
        top = m.group(1).split("/")[0]
        if m.group(1) and top != ".." and not (SOURCE / top).exists() and not (here / top).exists():
            continue  # a path of an installation or a run (share/doc/rcsweep/README.md), not of the repository
        if resolve_md(m.group(1), m.group(2), here) is None:
            problems.append(f"{where}: {m.group(0)} is not a file of the repository")
    for m in SECTION.finditer(joined):
        target = resolve_md("", m.group(1), here)
        section = strip_md(m.group(2))
        if target and not any(t == section or t.startswith(section) and not t[len(section)].isalnum()
                              for t in headings(target)[0]):
            problems.append(f"{where}: {m.group(1)} has no section {m.group(2)!r}")
    for m in ANCHOR.finditer(text):
        ref, anchor = m.group(1), m.group(2) or m.group(3)
        prefix, _, name = (ref or "").rpartition("/")
        target = resolve_md(prefix, name, here) if ref else path
        if target and anchor not in headings(target)[1]:
            problems.append(f"{where}: {ref or path.name}#{anchor} names no heading")
    for m in FILE_PATH.finditer(text):
        for named in expand_braces(m.group(1)):
            if not any(p.exists() for p in (SOURCE / named, here / named, SOURCE / "src" / named)):
                problems.append(f"{where}: {named} is not a file of the repository")
    if path.suffix == ".md":
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file = (here / target.split("#")[0]).resolve()
            if not file.exists() or not file.is_relative_to(SOURCE.resolve()):
                problems.append(f"{where}: link ({target}) points to no file of the repository")
    return problems


def test_cross_references_point_inside_the_repository():
    problems = [p for path, text in reference_files() for p in reference_problems(path, text)]
    assert not problems, "\n".join(problems)


def test_cross_reference_check_finds_broken_ones():
    src = SOURCE / "src" / "base" / "error.hpp"
    beside = os.path.relpath(ROOT.parent / "papers" / "paper.txt", src.parent)  # next to the checkout
    bad = ['// See MODELS.md "No such section".', "// See NOSUCH.md.", "// See MODELS.md#no-such-anchor.",
           f"// The paper ({beside}).", "// See STYLE.md."]
    if str(ROOT.parent) not in SHARED_FOLDERS:
        bad.append(f"// The paper ({ROOT.parent / 'papers' / 'paper.txt'}).")
    for text in bad:
        assert reference_problems(src, text), text
    assert reference_problems(DOCS / "X.md", "[a](no/such/file.md)")
    assert reference_problems(src, "// Priced in src/plan/no_such.cpp (plan/nor_this.hpp).")
    assert len(reference_problems(src, "// src/models/s4d.{hpp,cpp,txt}")) == 1
    assert not reference_problems(src, '// MODELS.md "Randomness", docs/GUARANTEES.md "One writer per\n// store".')


# docs/ARCHITECTURE.md "Modules": the order in which modules may include each other, and where
# each outside library may be included.
MODULE_ORDER = ["base", "rng", "linalg", "metrics", "config", "checkpoint", "models", "plan", "store", "sweep", "cli"]
SAME_TIER = {("rng", "linalg"), ("linalg", "rng")}
LIBRARY_HOME = {"hdf5.h": {"store"}, "H5DSpublic.h": {"store"}, "cblas.h": {"linalg"}, "lapacke.h": {"linalg"},
                "mpi.h": {"sweep", "cli"}, "omp.h": {"base"}, "toml++/toml.h": {"config", "plan"},
                "Random123/philox.h": {"rng"}, "CLI/CLI.hpp": {"cli"}}


def module_include_problems(module, text):
    problems = []
    for header in re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', text, re.M):
        used = header.split("/")[0]
        if used in MODULE_ORDER and MODULE_ORDER.index(used) > MODULE_ORDER.index(module) \
                and (module, used) not in SAME_TIER:
            problems.append(f"src/{module} includes {header}, of a later module")
        if header in LIBRARY_HOME and module not in LIBRARY_HOME[header]:
            problems.append(f"src/{module} includes {header}, which only {sorted(LIBRARY_HOME[header])} may")
    return problems


def test_modules_include_only_earlier_modules_and_their_own_libraries():
    arch = (DOCS / "ARCHITECTURE.md").read_text()
    assert "  <-  ".join(["base", "rng, linalg", "metrics", "config, checkpoint", *MODULE_ORDER[6:]]) in arch
    assert sorted(p.name for p in (SOURCE / "src").iterdir() if p.is_dir()) == sorted(MODULE_ORDER)
    readme = (SOURCE / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    for module in MODULE_ORDER:  # the README's layout block names every module, as does ARCHITECTURE.md's map
        assert f"src/{module} " in layout and f"| `{module}` |" in arch, module
    problems = [p for module in MODULE_ORDER for f in sorted((SOURCE / "src" / module).glob("*.[ch]pp"))
                for p in module_include_problems(module, f.read_text())]
    assert not problems, "\n".join(problems)
    assert module_include_problems("metrics", '#include "models/layer.hpp"')  # the check can fail
    assert module_include_problems("models", "#include <hdf5.h>")
