"""The sources' shape that a newcomer relies on (docs/CONTRIBUTING.md "Test"):

- every source unit src/<module>/<unit>.cpp has a test of its own, tests/unit/<module>/test_<unit>.cpp
  (a unit in a folder of a module, src/<module>/<folder>/<unit>.cpp, the same folder of the tests),
  or is in UNTESTED below with the reason (the test that covers it); the list holds no stale entry;
- tests that need mpiexec live in tests/mpi, none under tests/unit;
- CMake states the usage requirements: a library in src links PUBLIC every rcsweep library its
  headers include (rcsweep_base always: it carries the include folder) and PRIVATE what only its
  sources include, unless a PUBLIC link brings it; the program, the tests, the
  benchmarks and the fuzz harnesses link only libraries whose headers they include themselves,
  and every library they include comes with those links (HDF5, BLAS/LAPACK and toml++ included:
  each is private to its module, so a test that calls one links it itself).

The CMake files are read as text: the commands looked at here (add_library, add_executable,
target_link_libraries, rcsweep_unit_test, rcsweep_mpi_test) are written with literal names.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["base", "rng", "linalg", "metrics", "config", "checkpoint", "plan", "models", "store", "sweep", "cli"]

# Source units without tests/unit/<module>/test_<unit>.cpp, each with the test that covers it.
UNTESTED = {
    "base/exp": "tests/unit/linalg/test_linalg.cpp (exp_vectorisable against std::exp, with the kernels using it)",
    "cli/calibrate": "tests/e2e/test_calibrate.py",
    "cli/export": "tests/python/test_api.py and tests/e2e/test_cli.py (rcsweep export)",
    "cli/info": "tests/e2e/test_cli.py and tests/e2e/test_damaged_stores.py (rcsweep info)",
    "cli/launch": "tests/e2e/test_launcher.py (run -n: mpiexec started, signals forwarded)",
    "cli/ls": "tests/e2e/test_ls.py (rcsweep ls) and tests/python/test_catalog.py (what it runs)",
    "cli/main": "tests/e2e/test_cli.py (the commands, their exit codes)",
    "cli/merge": "tests/e2e/test_merge.py",
    "cli/plan": "tests/e2e/test_cli.py and tests/cluster (rcsweep plan, --emit)",
    "cli/run": "tests/e2e (every rcsweep run)",
    "config/grid_tables": "tests/unit/config/test_sweep_spec.cpp and test_sweep_errors.cpp ([axes], [[zip]])",
    "config/model_table": "tests/unit/config/test_sweep_spec.cpp and test_matrix_keys.cpp ([model])",
    "config/output_table": "tests/unit/config/test_sweep_spec.cpp and test_sweep_errors.cpp ([output])",
    "config/param_values": "tests/unit/config/test_params.cpp and test_sweep_errors.cpp",
    "config/sweep_parser": "tests/unit/config/test_sweep_spec.cpp and test_sweep_errors.cpp",
    "config/sweep_table": "tests/unit/config/test_adaptive_replicates.cpp and test_sweep_spec.cpp ([sweep])",
    "config/toml_nodes": "tests/unit/config/test_parse_state.cpp",
    **{f"models/mixers/{m}": "tests/unit/models/test_mixer_kinds.cpp (every descriptor: costs, draws, memory), "
       "test_layer.cpp and test_components.cpp (its forward), test_gradients.cpp (its backward)"
       for m in ("attention", "identity", "lti", "markov", "matrix", "mixers", "s4d", "ssd", "uniform")},
    "models/random_source": "tests/unit/models/test_layer.cpp and test_s4d.cpp (the draws of every mixer)",
    "store/store": "tests/unit/store/test_write.cpp (Store's writes and reads)",
    "store/store_impl": "tests/unit/store/test_write.cpp and test_open.cpp (the store's layout)",
    "store/validate": "tests/unit/store/test_store_validation.cpp",
    "sweep/driver": "tests/mpi/test_sweep_mpi.cpp (run_sweep at 1, 2 and 3 ranks)",
    "sweep/events": "tests/unit/cli/test_run_events.cpp (every event's name and rendering)",
    "sweep/mpi": "tests/mpi (every MPI test starts through it)",
    "sweep/service": "tests/mpi/test_sweep_mpi.cpp and test_scheduler_scaling.cpp (rank 0's service)",
    "sweep/stop": "tests/unit/sweep/test_duration.cpp and tests/e2e/test_stop_and_faults.py",
    "sweep/worker": "tests/mpi/test_sweep_mpi.cpp (the workers' loop)",
}

# Outside libraries that stay inside one module: a target that includes one links it itself.
WALLED = {"hdf5.h": "rcsweep_hdf5", "H5DSpublic.h": "rcsweep_hdf5_hl", "cblas.h": "rcsweep_blas",
          "lapacke.h": "rcsweep_blas", "blis.h": "rcsweep_blis_config", "toml++/toml.h": "tomlplusplus::tomlplusplus"}
PROVIDES = {"rcsweep_hdf5_hl": {"rcsweep_hdf5_hl", "rcsweep_hdf5"}}  # hdf5_hl brings the C library
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def source_units():
    """<module>/<unit>, or <module>/<folder>/<unit> for a unit in a folder of a module."""
    return sorted(f.relative_to(ROOT / "src").with_suffix("").as_posix() for m in MODULES
                  for f in (ROOT / "src" / m).rglob("*.cpp"))


def unit_tests():
    """The units that tests/unit/<module>[/<folder>]/test_<unit>.cpp files are named after."""
    unit = ROOT / "tests" / "unit"
    return {(f.parent.relative_to(unit) / f.stem[len("test_"):]).as_posix() for f in unit.rglob("test_*.cpp")}


def untested_problems(units, tests, untested):
    problems = [f"source unit {u} has no tests/unit/<module>/test_<unit>.cpp: write one, or name the test that "
                "covers it in UNTESTED" for u in units if u not in tests and u not in untested]
    problems += [f"UNTESTED names {u}, which " + ("has a test of its own now" if u in tests else "is no source unit")
                 for u in untested if u in tests or u not in units]
    problems += [f"UNTESTED[{u!r}] gives no reason" for u, why in untested.items() if not why.strip()]
    return problems


def test_every_source_unit_has_a_test_of_its_own_or_a_reason():
    problems = untested_problems(source_units(), unit_tests(), UNTESTED)
    assert not problems, "\n".join(problems)
    # the check can fail: a unit without a test, a stale entry, an entry without a reason
    assert untested_problems(["x/a"], set(), {})
    assert untested_problems(["x/a"], {"x/a"}, {"x/a": "covered"})
    assert untested_problems(["x/a"], set(), {"x/a": " "})


def test_tests_mirror_the_modules_and_mpi_tests_live_in_tests_mpi():
    dirs = sorted(p.name for p in (ROOT / "tests" / "unit").iterdir() if p.is_dir())
    assert set(dirs) <= set(MODULES), dirs
    for d in dirs:
        assert (ROOT / "tests" / "unit" / d / "CMakeLists.txt").exists(), d
        text = strip_comments((ROOT / "tests" / "unit" / d / "CMakeLists.txt").read_text())
        assert "rcsweep_mpi_test" not in text, f"tests/unit/{d}: an MPI test belongs in tests/mpi"
    for f in (ROOT / "tests" / "unit").rglob("*.[ch]pp"):
        headers = [h for _, h in INCLUDE.findall(f.read_text())]
        assert "mpi.h" not in headers and not any(h.endswith("mpi_run.hpp") for h in headers), \
            f"{f.relative_to(ROOT)} uses MPI: it belongs in tests/mpi"


# --- CMake -------------------------------------------------------------------------------------

COMMAND = re.compile(r"\b(add_library|add_executable|target_link_libraries|rcsweep_unit_test|rcsweep_mpi_test|set)"
                     r"\s*\(([^()]*)\)")


def strip_comments(text):
    return re.sub(r"#[^\n]*", "", text)


class Target:
    def __init__(self, name, folder, sources, kind):
        self.name, self.folder, self.sources, self.kind = name, folder, sources, kind
        self.public, self.private = set(), set()


def read_targets(cmake_files):
    """Targets of the given CMakeLists.txt: name -> Target (sources as paths; links by scope)."""
    targets = {}
    for cmake in cmake_files:
        folder = cmake.parent
        variables = {}

        def path(word):
            word = word.replace("${PROJECT_SOURCE_DIR}", str(ROOT)).replace("${CMAKE_CURRENT_SOURCE_DIR}", str(folder))
            return None if "${" in word or not word.endswith((".cpp", ".c")) else (folder / word).resolve()

        for command, args in COMMAND.findall(strip_comments(cmake.read_text())):
            words = args.split()
            if not words:
                continue
            if command == "set":
                variables[words[0]] = words[1:]
            elif command in ("add_library", "add_executable"):
                if "INTERFACE" in words or "IMPORTED" in words:
                    continue
                sources = [p for p in map(path, words[1:]) if p]
                targets[words[0]] = Target(words[0], folder, sources, command)
            elif command == "target_link_libraries" and words[0] in targets:
                scope = "private"
                for w in words[1:]:
                    if w in ("PUBLIC", "PRIVATE", "INTERFACE"):
                        scope = w.lower()
                    elif w != "rcsweep_warnings" and not w.startswith("$"):
                        getattr(targets[words[0]], "public" if scope == "public" else "private").add(w)
                    elif w.startswith("${RCSWEEP_FUZZ_LIBS_"):  # tests/fuzz: a variable per harness
                        for name, values in variables.items():
                            if w == "${" + name + "}":
                                targets[words[0]].private.update(values)
            else:  # rcsweep_unit_test / rcsweep_mpi_test (NAME SOURCES ... LIBS ... [RANKS ...])
                name, part, parts = words[0], None, {"SOURCES": [], "LIBS": [], "RANKS": []}
                for w in words[1:]:
                    if w in parts:
                        part = w
                    elif part:
                        parts[part].append(w)
                sources = [p for p in map(path, parts["SOURCES"]) if p]
                t = Target(name, folder, sources, command)
                t.private = set(parts["LIBS"])
                if command == "rcsweep_mpi_test":  # cmake/RcsweepTesting.cmake adds its main and rcsweep_sweep
                    t.sources.append(ROOT / "tests" / "common" / "mpi_gtest_main.cpp")
                    t.private.add("rcsweep_sweep")
                targets[name] = t
    # the fuzz replays: rcsweep_fuzz_replay_<name> from fuzz_<name>.cpp, linked by rcsweep_fuzz_harness()
    fuzz = ROOT / "tests" / "fuzz"
    if fuzz / "CMakeLists.txt" in cmake_files:
        text = strip_comments((fuzz / "CMakeLists.txt").read_text())
        for name, libs in re.findall(r"set\(RCSWEEP_FUZZ_LIBS_(\w+)\s+([^()]*)\)", text):
            t = Target(f"rcsweep_fuzz_replay_{name}", fuzz, [fuzz / f"fuzz_{name}.cpp", fuzz / "replay_main.cpp"],
                       "add_executable")
            t.private = set(libs.split())
            targets[t.name] = t
    return targets


def header_owners(src_targets):
    """src/<module>/<file>.hpp -> the target that builds its .cpp (else the module's library)."""
    owners = {}
    for m in MODULES:
        folder = (ROOT / "src" / m).resolve()
        here = [t for t in src_targets.values() if t.folder.resolve() == folder]
        program = next((t for t in here if t.kind == "add_executable"), None)
        main = next((t for t in here if t.name == f"rcsweep_{m}"), program)
        for h in sorted(folder.rglob("*.hpp")):
            owners[f"{m}/{h.relative_to(folder).as_posix()}"] = next(
                (t for t in here if h.with_suffix(".cpp") in t.sources), main)
    return owners


def uses(files, owners):
    """The libraries that files include (rcsweep targets and walled outside libraries), following the
    test folder's own headers and headers of an executable compiled into the target."""
    used, seen, todo = set(), set(), list(files)
    while todo:
        f = todo.pop()
        if f in seen or not f.exists():
            continue
        seen.add(f)
        for kind, h in INCLUDE.findall(f.read_text()):
            if h in WALLED:
                used.add(WALLED[h])
            elif h.startswith("rcsweep/"):  # the generated version.hpp: rcsweep_base's include folder
                used.add("rcsweep_base")
            elif h in owners and owners[h]:
                if owners[h].kind == "add_executable":  # compiled into the target: what it includes counts
                    todo.append(ROOT / "src" / h)
                else:
                    used.add(owners[h].name)
            elif kind == '"' and (f.parent / h).exists():
                todo.append((f.parent / h).resolve())
    return used


def all_targets():
    src = read_targets(sorted((ROOT / "src").glob("*/CMakeLists.txt")))
    others = read_targets(sorted((ROOT / "tests").rglob("CMakeLists.txt")) + [ROOT / "bench" / "CMakeLists.txt"])
    return src, others


def closure(names, src):
    """names and everything their PUBLIC usage requirements bring, transitively."""
    out, todo = set(), list(names)
    while todo:
        x = todo.pop()
        if x not in out:
            out.add(x)
            todo += list(PROVIDES.get(x, ())) + (sorted(src[x].public) if x in src else [])
    return out


def counted(names):
    return {x for x in names if x.startswith("rcsweep_") or x in WALLED.values()}


def library_problems(t, owners, src):
    own = [f for f in t.folder.rglob("*.hpp")
           if owners.get(f"{t.folder.name}/{f.relative_to(t.folder).as_posix()}") is t]
    headers = {x for x in uses(own, owners) - {t.name} if x.startswith("rcsweep_") and x not in WALLED.values()}
    if t.name != "rcsweep_base":  # it carries the include folder src/ that every header is found in
        headers.add("rcsweep_base")
    used = uses(own + t.sources, owners) - {t.name}
    public = counted(t.public)
    linked = counted(t.public | t.private)
    problems = [f"{t.name}: its headers include {x}, so it links it PUBLIC" for x in sorted(headers - public)]
    problems += [f"{t.name}: links {x} PUBLIC but no header of it includes it" for x in sorted(public - headers)]
    problems += [f"{t.name}: includes {x} but does not link it" for x in sorted(used - closure(linked, src))]
    problems += [f"{t.name}: links {x} but includes nothing of it" for x in sorted(linked - used)
                 if not (PROVIDES.get(x, set()) - {x}) & used]
    return problems


def consumer_problems(t, owners, src):
    used = uses(t.sources, owners) - {t.name}
    linked = counted(t.public | t.private)
    return ([f"{t.name}: includes {x} itself, but neither links it nor gets it through what it links"
             for x in sorted(used - closure(linked, src))] +
            [f"{t.name}: links {x} but includes nothing of it (what it uses brings it)"
             for x in sorted(linked - used) if not (PROVIDES.get(x, set()) - {x}) & used])


def test_libraries_state_their_usage_requirements():
    src, _ = all_targets()
    owners = header_owners(src)
    assert {"rcsweep_store", "rcsweep_sweep", "rcsweep", "rcsweep_run_events", "rcsweep_job_script"} <= set(src)
    problems = [p for t in src.values() if t.kind == "add_library" for p in library_problems(t, owners, src)]
    assert not problems, "\n".join(problems)
    # the check can fail: store's headers include models, which it would link PRIVATE
    store = src["rcsweep_store"]
    store.public.discard("rcsweep_models")
    store.private.add("rcsweep_models")
    found = library_problems(store, owners, src)
    assert "rcsweep_store: its headers include rcsweep_models, so it links it PUBLIC" in found, found


def test_program_tests_and_benchmarks_link_what_they_include():
    src, others = all_targets()
    owners = header_owners(src)
    # the program and every executable of tests/ and bench/ (not the LD_PRELOAD shims, plain C)
    consumers = [src["rcsweep"]] + [t for t in others.values() if t.sources and t.kind != "add_library"]
    names = {t.name for t in consumers}
    assert {"test_base", "test_rng", "test_linalg", "test_metrics", "test_store", "test_sweep_mpi",
            "make_test_store", "bench_kernels", "rcsweep_fuzz_replay_store"} <= names, names
    problems = [p for t in consumers for p in consumer_problems(t, owners, src)]
    assert not problems, "\n".join(problems)
    # the check can fail: a test that reads HDF5 itself without rcsweep_hdf5, one that lists an unused library
    t = others["test_store"]
    t.private.discard("rcsweep_hdf5")
    t.private.add("rcsweep_sweep")
    found = consumer_problems(t, owners, src)
    assert any(p.startswith("test_store: includes rcsweep_hdf5 itself") for p in found), found
    assert any(p.startswith("test_store: links rcsweep_sweep") for p in found), found
