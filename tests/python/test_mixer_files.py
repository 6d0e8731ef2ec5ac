"""How many files a mixer is named in (docs/CONTRIBUTING.md "Worked path: add a mixer").

A mixer is one descriptor in src/models/mixers/ (its own file and a line of mixers.cpp). Every
other source file that names it (`Mixer::<name>`) is a place its descriptor does not own yet.
PLACES lists those places per mixer today; the lists may only shrink: a mixer named in a file
not listed for it fails, as does a listed file that no longer names it (take it off the list),
and a mixer that is not listed at all (a new one) may be named in at most NEW_MIXER_PLACES files
outside src/models/mixers/.
"""
import re
from pathlib import Path

import named_places

ROOT = Path(__file__).resolve().parents[2]
MIXERS_DIR = "src/models/mixers/"

# The configuration's row of each mixer (params.cpp: its name, classes and checks; softmax is also
# ModelParams' default in params.hpp); the layer, the reverse pass and the theorem ask the
# descriptor, and so do the planner and the weights dump. The matrix mixer's matrix is attached
# by the sweep spec; S4D is the mixer calibration measures.
PLACES = {
    "softmax": {"src/config/params.cpp", "src/config/params.hpp"},
    "markov": {"src/config/params.cpp"},
    "identity": {"src/config/params.cpp"},
    "uniform": {"src/config/params.cpp"},
    "relu": {"src/config/params.cpp"},
    "sigmoid": {"src/config/params.cpp"},
    "ssd": {"src/config/params.cpp"},
    "lti": {"src/config/params.cpp"},
    "matrix": {"src/config/sweep_spec.cpp", "src/config/params.cpp"},
    "s4d": {"src/config/params.cpp", "src/plan/calibration.cpp"},
}
# A new mixer: its row of the configuration's mixer table (params.cpp); its enumerator in
# params.hpp does not name it as Mixer::<name>.
NEW_MIXER_PLACES = 1


def mixers():
    """The enumerators of config::Mixer, in order."""
    text = (ROOT / "src/config/params.hpp").read_text()
    body = re.search(r"enum class Mixer\s*\{([^}]*)\}", text).group(1)
    return [name.strip() for name in body.split(",") if name.strip()]


def sources():
    return {str(f.relative_to(ROOT)): f.read_text() for f in sorted((ROOT / "src").rglob("*.[ch]pp"))}


def places(mixer, files):
    """The files outside src/models/mixers/ that name Mixer::<mixer>."""
    return named_places.places(files, re.compile(r"\bMixer::" + re.escape(mixer) + r"\b"), MIXERS_DIR)


def place_problems(names, files, listed, new_limit):
    return named_places.place_problems(names, lambda m: places(m, files), listed, new_limit, "mixer",
                                       lambda m: f"Mixer::{m}", MIXERS_DIR,
                                       f"that belongs in its descriptor ({MIXERS_DIR})")


def test_a_mixer_is_named_only_where_its_descriptor_does_not_reach_yet():
    names = mixers()
    assert "softmax" in names and "s4d" in names
    problems = place_problems(names, sources(), PLACES, NEW_MIXER_PLACES)
    assert not problems, "\n".join(problems)


def test_the_count_can_fail():
    files = {"x/a.cpp": "Mixer::foo", "x/b.cpp": "Mixer::foo;", "x/c.cpp": "x = Mixer::foo", MIXERS_DIR + "foo.cpp":
             "Mixer::foo", "x/d.cpp": "Mixer::foobar"}
    assert places("foo", files) == {"x/a.cpp", "x/b.cpp", "x/c.cpp"}
    assert place_problems(["foo"], files, {}, 3) == []
    assert len(place_problems(["foo"], files, {}, 2)) == 1                     # a new mixer in too many files
    assert len(place_problems(["foo"], files, {"foo": {"x/a.cpp", "x/b.cpp"}}, 9)) == 1  # a new place
    assert len(place_problems(["foo"], files, {"foo": {"x/a.cpp", "x/b.cpp", "x/c.cpp", "x/e.cpp"}}, 9)) == 1
