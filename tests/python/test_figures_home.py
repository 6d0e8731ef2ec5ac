"""Measured figures have one home, docs/BENCHMARKS.md (each with its command, machine and date):
comments in src/ name no CPU model and carry no rate, bandwidth, speed-up or share of the run time;
the other docs pages, the changelog and the README carry no measured rate, speed-up, machine or
machine load, no "measured N ms" and no measured duration ("about N s", "N–M s", "N ms", "N → M s":
a test's, a sweep's or Open MPI's time is linked to BENCHMARKS instead); BENCHMARKS' "Contents"
lists every one of its sections. Bounds, defaults and assumed rates ("at least 500 bundles/s",
"assumed 18 GFLOP/s", "at most 50 ms") are configuration, not figures; the few settings that read
like a measurement are in ALLOWED, each with why."""
import re

from conftest import SOURCE

DOCS = SOURCE / "docs"
# The page whose figures are its subject.
FIGURE_PAGES = {"BENCHMARKS.md"}

MACHINE = re.compile(r"\b(Zen ?\d|Xeon|EPYC|Milan|Genoa|Sapphire Rapids|Ice Lake|Cascade Lake)\b")
RATE = re.compile(r"\d[\d,.]*\s?(?:[GTM]FLOP/s|[GMK]i?B/s|(?:results|bundles|tasks)/s)")
SPEED_UP = re.compile(r"\d(?:\.\d+)?\s?[×x] (?:faster|slower|as fast)\b|\bspeed-ups? (?:of )?\d")
LOAD = re.compile(r"\bload(?: average)? (?:of )?\d")
MEASURED = re.compile(r"\b(?:measured|took)\b[^.;:()\[\]]{0,60}?\d(?:\.\d+)?\s?(?:ns|ms|µs|us|s|min|%|×)(?!\w)")
SHARE_OF_TIME = re.compile(r"\d(?:\.\d+)?\s?% of (?:the |a |its )?(?:\w+ )?(?:time|sweep|grid|samples|run time)\b")
# Durations as a page quotes a measurement of them: "about 20 s", "3–6 s", "52 ms", "0.35 → 0.25 s",
# "0.07 s instead of 0.26 s".
NUMBER = r"\d[\d,.]*"
UNIT = r"(?:(?:ns|µs|us|ms|s|sec|min|minutes?|seconds?|h|hours?)(?!\w))"
ABOUT_DURATION = re.compile(rf"\b(?:about|around|roughly|approximately|~)\s?{NUMBER}\s?{UNIT}")
RANGE_DURATION = re.compile(rf"{NUMBER}\s?{UNIT}?\s?(?:–|-|to)\s?{NUMBER}\s?{UNIT}")
MILLISECONDS = re.compile(rf"{NUMBER}\s?(?:ms|µs|ns)(?!\w)")
BEFORE_AFTER = re.compile(rf"{NUMBER}\s?{UNIT}?\s?(?:→|->|instead of|against)\s?{NUMBER}\s?{UNIT}")
# What precedes a bound, a default or an assumption rather than a measurement.
BOUND = re.compile(r"(?:at least|at most|assumed|default|≥|≤|under|below|above|within|every)\s*$")
# Settings that read like a measurement, each with why it is not one (its page's words, exactly).
ALLOWED = {
    "at 1 GFLOP/s": "the slow rate the silence check assumes for a layer (RCSWEEP_SILENCE_S)",
    "two 1 ms tasks": "the length of the sleeping tasks HandOutRateOfTinyTasks hands out, a test parameter",
    "tasks of 0.1–1 s": "the sleep lengths test_scheduler_scaling gives its work-bound case",
    "tasks of 0.05–3 s": "the sleep lengths test_scheduler_scaling gives its largest-bound case",
    "1–2 s instead of Slurm's 30–60 s": "the scheduling interval the test Slurm is configured with, "
                                         "and Slurm's default",
}
# Measured figures still on a page that has not moved them yet, each with where it belongs. Moving
# one to BENCHMARKS (and linking it) means deleting its entry here; the list only shrinks.
NOT_YET_MOVED = {
    "about 2 minutes the first time, on 2 cores": "FUZZING.md's build time of the fuzzers: BENCHMARKS "
                                                  "\"The test suite's time\"",
}
PAGE_PATTERNS_LEFT_OUT = {
    # The changelog says which CPUs a change applies to ("AVX-512 machines: AMD Zen 4 and Zen 5").
    "CHANGELOG.md": ("MACHINE",),
}


def prose(text):
    """Markdown without fenced blocks and inline code: example output and commands name machines
    and numbers that are not measurements of this project."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def comments(text):
    """The comments of a C++ file (// to the end of the line, /* ... */), strings left out, and the
    quoted examples in them (the format of a CPU model string is not a measurement)."""
    out = []
    for m in re.finditer(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', text, re.S):
        if not m.group(0).startswith('"'):
            out.append(m.group(0))
    return re.sub(r'"[^"\n]*"', "", re.sub(r"\n\s*///?<?", " ", "\n".join(out)))


def figure_problems(where, text, patterns):
    problems = []
    joined = re.sub(r"\s+", " ", text)  # a figure may run over a line break
    for allowed in (*ALLOWED, *NOT_YET_MOVED):
        joined = joined.replace(allowed, "")
    for pattern in patterns:
        for m in pattern.finditer(joined):
            if pattern is not MACHINE and BOUND.search(joined[max(0, m.start() - 14):m.start()]):
                continue
            problems.append(f"{where}: {joined[max(0, m.start() - 50):m.end() + 20]!r}")
    return problems


DURATION_PATTERNS = (ABOUT_DURATION, RANGE_DURATION, MILLISECONDS, BEFORE_AFTER)
DOC_PATTERNS = (MACHINE, RATE, SPEED_UP, LOAD, MEASURED, *DURATION_PATTERNS)
SOURCE_PATTERNS = (MACHINE, RATE, SPEED_UP, LOAD, MEASURED, SHARE_OF_TIME)
PATTERN_NAMES = {id(v): k for k, v in globals().items() if isinstance(v, re.Pattern)}


def doc_pages():
    return [SOURCE / "README.md", *(p for p in sorted(DOCS.glob("*.md")) if p.name not in FIGURE_PAGES)]


def page_patterns(page):
    left_out = PAGE_PATTERNS_LEFT_OUT.get(page.name, ())
    return tuple(p for p in DOC_PATTERNS if PATTERN_NAMES[id(p)] not in left_out)


def test_docs_pages_other_than_benchmarks_carry_no_measured_figures():
    problems = [p for page in doc_pages()
                for p in figure_problems(page.relative_to(SOURCE), prose(page.read_text()), page_patterns(page))]
    assert not problems, "move these to docs/BENCHMARKS.md (with command, machine, date) and link them:\n" + \
        "\n".join(problems)


def test_source_comments_carry_no_benchmark_figures():
    files = sorted(p for p in (SOURCE / "src").rglob("*") if p.suffix in (".cpp", ".hpp", ".h"))
    assert len(files) > 50
    problems = [p for f in files
                for p in figure_problems(f.relative_to(SOURCE), comments(f.read_text()), SOURCE_PATTERNS)]
    assert not problems, "comments name the benchmark; the figures go to docs/BENCHMARKS.md, section " \
        "'Figures behind choices in the source':\n" + "\n".join(problems)


def test_the_checks_find_figures():
    def doc(text):
        return figure_problems("a page", prose(text), DOC_PATTERNS)

    def src(text):
        return figure_problems("x.cpp", comments(text), SOURCE_PATTERNS)

    for bad in ("The grid runs 1.96× faster on 2 ranks.", "dgemm reaches 42.5 GFLOP/s here.",
                "on the Zen 3 VM the layer takes 3 ms", "a read at 23.3–24.0 GB/s", "(load average 9–12)",
                "every rank exits, measured 5–170 ms after the kill", "it took 95 s for the 12 figures",
                "the writer takes in 3000 results/s", "an AMD EPYC machine", "a speed-up of 2 on two cores"):
        assert doc(bad), bad
    for fine in ("asserted ≥ 500 bundles/s", "at least 500 bundles/s to 63 workers",
                 "the assumed 18 GFLOP/s per rank", "a layer of 2 GFLOP or more", "within 1 % of the best",
                 "```\n# computed by   OpenBLAS 0.3.21 Cooperlake on AMD EPYC (family 25, model 17)\n```",
                 "e.g. `AMD EPYC (family 25, model 17)`", "(measured on the grid: 2.0e-13)",
                 "ten times a layer at 1 GFLOP/s if that is longer", "progress at most every 10 s"):
        assert not doc(fine), fine
    # Durations: a test's, a sweep's, a before and after.
    for bad in ("the spellings above run on a store (about 20 s);", "`ls_fig1.toml` (3–6 s)",
                "the job ends 6–9 s after a node's\nlink is cut", "sets its time: 42 µs instead of 52 µs",
                "starts in 0.07 s instead of 0.26 s", "(0.35 → 0.25 s of start-up)", "2048 × 512 110 → 79 ms on one thread",
                "the suite takes about 3 minutes", "`_exit`s with status 195 1–3.6 s later", "roughly 4 min",
                "run 56–58 GFLOP/s where one packed call runs 46–52"):
        assert doc(bad), bad
    for fine in ("`--grace` (default 30 s)", "`STOP_BEFORE` (120 s)", "every 10 s otherwise", "at most 50 ms",
                 "within 15 s", "the writers get 2 s", "(`5` = 5 min, was 5 s)", "T = 1024–8192", "n 4→1 from layer 4",
                 "(`note: the sweep is about 3.1 min of one core`)", "```\nbench_writer 4096 3  # about 4 min\n```",
                 "4320 bundles of two 1 ms tasks", "300 s + 9 × 20 s", "a sweep file of at most 16 MiB",
                 "pr/T to 0.3 %, sr/T to 0.2–4 %"):
        assert not doc(fine), fine
    for bad in ("// 56-58 GFLOP/s against 46-52 on Zen 4", "/* clearing it was 2 % of the time */",
                "// 1.7x faster than libm's loop", "// unpinned: 25 GFLOP/s", "// measured 1.72 ns per normal",
                "// Xeon: dsyevx"):
        assert src(bad), bad
    for fine in ('std::string s = "EPYC";  // the vendor string', "// while the slices repeat under 2 % of the work",
                 "// the measured effect: docs/BENCHMARKS.md", '/// e.g.\n/// "AMD EPYC (family 25, model 17)"', "/// 10 times a layer of the bundle at 1 GFLOP/s"):
        assert not src(fine), fine


def test_allowed_phrases_are_on_a_page():
    """An entry of ALLOWED or NOT_YET_MOVED that no page holds any more goes (the lists do not rot)."""
    pages = " ".join(re.sub(r"\s+", " ", prose(page.read_text())) for page in doc_pages())
    unused = [phrase for phrase in (*ALLOWED, *NOT_YET_MOVED) if phrase not in pages]
    assert not unused, f"no page says these any more; delete them from the lists: {unused}"


def test_benchmarks_contents_lists_every_section():
    text = (DOCS / "BENCHMARKS.md").read_text()
    body = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    sections = re.findall(r"^## (.+)$", body, re.M)
    assert sections[:3] == ["Summary", "Machines", "Contents"]
    contents = text[text.index("## Contents"):text.index(f"## {sections[3]}")]
    listed = re.findall(r"^\| [^|]+ \| \[([^\]]+)\]\(#", contents, re.M)
    assert listed == sections[3:], "Contents must list BENCHMARKS' sections in their order"
