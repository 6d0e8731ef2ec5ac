"""Measured figures have one home, docs/BENCHMARKS.md (each with its command, machine and date):
comments in src/ name no CPU model and carry no rate, bandwidth, speed-up or share of the run time;
the other docs pages and the README carry no measured rate, speed-up, machine or machine load, and
no "measured N ms"; BENCHMARKS' "Contents" lists every one of its sections. Bounds, defaults and
assumed rates ("at least 500 bundles/s", "assumed 18 GFLOP/s") are configuration, not figures."""
import re

from conftest import SOURCE

DOCS = SOURCE / "docs"
# Pages whose figures are their subject: the measurements themselves, and the changelog's history.
FIGURE_PAGES = {"BENCHMARKS.md", "CHANGELOG.md"}

MACHINE = re.compile(r"\b(Zen ?\d|Xeon|EPYC|Milan|Genoa|Sapphire Rapids|Ice Lake|Cascade Lake)\b")
RATE = re.compile(r"\d[\d,.]*\s?(?:[GTM]FLOP/s|[GMK]i?B/s|(?:results|bundles|tasks)/s)")
SPEED_UP = re.compile(r"\d(?:\.\d+)?\s?[×x] (?:faster|slower|as fast)\b|\bspeed-ups? (?:of )?\d")
LOAD = re.compile(r"\bload(?: average)? (?:of )?\d")
MEASURED = re.compile(r"\b(?:measured|took)\b[^.;:()\[\]]{0,60}?\d(?:\.\d+)?\s?(?:ns|ms|µs|us|s|min|%|×)(?!\w)")
SHARE_OF_TIME = re.compile(r"\d(?:\.\d+)?\s?% of (?:the |a |its )?(?:\w+ )?(?:time|sweep|grid|samples|run time)\b")
# What precedes a bound, a default or an assumption rather than a measurement.
BOUND = re.compile(r"(?:at least|at most|assumed|default|≥|≤|under|below|above)\s*$")
# Configured rates that a sentence states as such (a slow rate the silence check assumes).
ALLOWED = ("at 1 GFLOP/s",)


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
    for allowed in ALLOWED:
        text = text.replace(allowed, "")
    joined = re.sub(r"\s+", " ", text)  # a figure may run over a line break
    for pattern in patterns:
        for m in pattern.finditer(joined):
            if pattern is not MACHINE and BOUND.search(joined[max(0, m.start() - 14):m.start()]):
                continue
            problems.append(f"{where}: {joined[max(0, m.start() - 50):m.end() + 20]!r}")
    return problems


DOC_PATTERNS = (MACHINE, RATE, SPEED_UP, LOAD, MEASURED)
SOURCE_PATTERNS = (MACHINE, RATE, SPEED_UP, LOAD, MEASURED, SHARE_OF_TIME)


def doc_pages():
    return [SOURCE / "README.md", *(p for p in sorted(DOCS.glob("*.md")) if p.name not in FIGURE_PAGES)]


def test_docs_pages_other_than_benchmarks_carry_no_measured_figures():
    problems = [p for page in doc_pages()
                for p in figure_problems(page.relative_to(SOURCE), prose(page.read_text()), DOC_PATTERNS)]
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
    for bad in ("// 56-58 GFLOP/s against 46-52 on Zen 4", "/* clearing it was 2 % of the time */",
                "// 1.7x faster than libm's loop", "// unpinned: 25 GFLOP/s", "// measured 1.72 ns per normal",
                "// Xeon: dsyevx"):
        assert src(bad), bad
    for fine in ('std::string s = "EPYC";  // the vendor string', "// while the slices repeat under 2 % of the work",
                 "// the measured effect: docs/BENCHMARKS.md", '/// e.g.\n/// "AMD EPYC (family 25, model 17)"', "/// 10 times a layer of the bundle at 1 GFLOP/s"):
        assert not src(fine), fine


def test_benchmarks_contents_lists_every_section():
    text = (DOCS / "BENCHMARKS.md").read_text()
    body = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    sections = re.findall(r"^## (.+)$", body, re.M)
    assert sections[:3] == ["Summary", "Machines", "Contents"]
    contents = text[text.index("## Contents"):text.index(f"## {sections[3]}")]
    listed = re.findall(r"^\| [^|]+ \| \[([^\]]+)\]\(#", contents, re.M)
    assert listed == sections[3:], "Contents must list BENCHMARKS' sections in their order"
