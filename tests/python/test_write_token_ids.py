"""scripts/write_token_ids.py: the files it writes (through a stand-in `transformers` package on
PYTHONPATH, so that no tokenizer needs installing), its clear refusal when transformers is missing,
--from-ids, --synthetic and the example token file it wrote (jobs/examples/tokens/excerpts.txt)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "write_token_ids.py"
EXAMPLE = ROOT / "jobs" / "examples" / "tokens" / "excerpts.txt"
PYTHON = "/usr/bin/python3"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from encoder_reference import read_tokens  # noqa: E402

# A stand-in for transformers.AutoTokenizer: ids from a vocab.txt of the folder (one token per line,
# its line number the id), [CLS] ... [SEP] around the words, truncation keeping [SEP]; every call
# is logged so the test sees the arguments the script passed.
FAKE = '''
import json, os
from pathlib import Path

class _Tokenizer:
    def __init__(self, folder):
        self.vocab = {w: i for i, w in enumerate(Path(folder, "vocab.txt").read_text().split())}

    def __call__(self, text, truncation=False, max_length=None, add_special_tokens=False):
        with open(os.environ["FAKE_TOKENIZER_LOG"], "a") as log:
            log.write(json.dumps([text, truncation, max_length, add_special_tokens]) + "\\n")
        ids = [self.vocab.get(w, self.vocab["[UNK]"]) for w in text.lower().split()]
        if add_special_tokens:
            if truncation and max_length is not None:
                ids = ids[:max_length - 2]
            ids = [self.vocab["[CLS]"]] + ids + [self.vocab["[SEP]"]]
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

class AutoTokenizer:
    @staticmethod
    def from_pretrained(folder):
        return _Tokenizer(folder)
'''


def run(*args, env_extra=None, cwd=None):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env_extra or {}))
    return subprocess.run([PYTHON, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture
def fake_transformers(tmp_path):
    pkg = tmp_path / "fake" / "transformers"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE)
    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\non\nmat\n")
    log = tmp_path / "calls.log"
    return model, {"PYTHONPATH": str(tmp_path / "fake"), "FAKE_TOKENIZER_LOG": str(log)}, log


def test_tokenizer_mode_writes_one_line_per_excerpt(tmp_path, fake_transformers):
    model, env, log = fake_transformers
    text = tmp_path / "text.txt"
    text.write_text("The cat sat\n\n   \nthe cat sat on the mat the end\nMat\n")
    out = tmp_path / "tokens.txt"
    p = run("--tokenizer", model, text, "-o", out, "--max-length", 6, env_extra=env)
    assert p.returncode == 0, p.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# token ids of text.txt") and "at most 6 tokens" in lines[0], lines[0]
    assert lines[1:] == ["2 4 5 6 3", "2 4 5 6 7 3", "2 8 3"]  # truncated to 6 with [SEP] kept; UNK = 1 nowhere
    assert read_tokens(out) == [[2, 4, 5, 6, 3], [2, 4, 5, 6, 7, 3], [2, 8, 3]]
    calls = [line for line in log.read_text().splitlines()]
    assert len(calls) == 3 and all(c.endswith(", true, 6, true]") for c in calls), calls
    # the default length is 512
    p = run("--tokenizer", model, text, "-o", out, env_extra=env)
    assert p.returncode == 0 and "at most 512 tokens" in out.read_text().splitlines()[0]
    assert out.read_text().splitlines()[2] == "2 4 5 6 7 4 8 4 1 3"  # "end" is unknown


def test_a_missing_transformers_is_a_clear_error(tmp_path):
    # a transformers that cannot be imported, whether or not the real one is installed
    blocked = tmp_path / "blocked" / "transformers"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('No module named transformers')\n")
    (tmp_path / "text.txt").write_text("a b\n")
    p = run("--tokenizer", tmp_path, tmp_path / "text.txt", "-o", tmp_path / "t.txt",
            env_extra={"PYTHONPATH": str(tmp_path / "blocked")})
    assert p.returncode == 2
    assert p.stderr.strip() == ("error: --tokenizer needs the transformers package, which is not installed (pip "
                                "install transformers; it is not a dependency of rcsweep); --from-ids and "
                                "--synthetic need only Python")
    assert "Traceback" not in p.stderr and not (tmp_path / "t.txt").exists()


def test_from_ids_normalises_and_refuses_like_rcsweep(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("# keep me\n\n  101\t 7  8   102 \r\n\n   # indented comment\n5\n")
    out = tmp_path / "out.txt"
    assert run("--from-ids", src, "-o", out).returncode == 0
    assert out.read_text() == "# keep me\n101 7 8 102\n# indented comment\n5\n"
    assert run("--from-ids", src, "-o", out, "--max-length", 2).returncode == 0
    assert out.read_text() == "# keep me\n101 7\n# indented comment\n5\n"
    p = run("--from-ids", src, "-o", out, "--vocab-size", 100)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {src}: id 101 is not below the vocabulary size 100"
    for text, message in [("1 2\n3 x 4\n", "line 2, column 3: token 'x' is not a token id"),
                          ("1 -2\n", "line 1, column 3: token '-2' is not a token id"),
                          ("1 2 # c\n", "line 1, column 5: token '#' is not a token id"),
                          ("9007199254740993\n", "line 1, column 1: token '9007199254740993' is above 2^53"),
                          ("  ２\n", "line 1, column 3: token '２' is not a token id"),
                          ("\n# only comments\n", "holds no excerpt")]:
        src.write_text(text)
        p = run("--from-ids", src, "-o", tmp_path / "never.txt")
        assert p.returncode == 2 and p.stderr.startswith(f"error: {src}: {message}"), (text, p.stderr)
        assert not (tmp_path / "never.txt").exists()
    src.write_text("9007199254740992 0\n")  # 2^53 itself is accepted
    assert run("--from-ids", src, "-o", out).returncode == 0 and out.read_text() == "9007199254740992 0\n"


def test_synthetic_excerpts_are_bert_shaped_and_seeded(tmp_path):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    assert run("--synthetic", 20, "--seed", 3, "--max-length", 16, "-o", a).returncode == 0
    assert run("--synthetic", 20, "--seed", 3, "--max-length", 16, "-o", b).returncode == 0
    assert run("--synthetic", 20, "--seed", 4, "--max-length", 16, "-o", c).returncode == 0
    body = [f.read_text().split("\n", 2)[2] for f in (a, b, c)]  # after the comments naming the file
    assert body[0] == body[1] != body[2]
    assert a.read_text().splitlines()[1].endswith(f"--seed 3 --max-length 16 -o {a}")
    assert a.read_text().startswith("# SYNTHETIC token ids, not text")
    excerpts = read_tokens(a)
    assert len(excerpts) == 20
    for e in excerpts:
        assert 8 <= len(e) <= 16 and e[0] == 101 and e[-1] == 102
        assert all(1996 <= i <= 29611 for i in e[1:-1])
    assert len({len(e) for e in excerpts}) > 3  # lengths vary
    assert run("--synthetic", 2, "--max-length", 7, "-o", a).returncode == 2


def test_the_example_token_file_is_what_its_command_writes(tmp_path):
    lines = EXAMPLE.read_text().splitlines()
    assert lines[0].startswith("# SYNTHETIC token ids, not text")
    command = lines[1].removeprefix("# written by: scripts/write_token_ids.py ").split()
    assert command[-2:] == ["-o", "jobs/examples/tokens/excerpts.txt"]
    (tmp_path / "jobs" / "examples" / "tokens").mkdir(parents=True)
    p = run(*command, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "jobs" / "examples" / "tokens" / "excerpts.txt").read_bytes() == EXAMPLE.read_bytes()
    excerpts = read_tokens(EXAMPLE)
    assert len(excerpts) == 32 and max(map(len, excerpts)) <= 128
    assert all(e[0] == 101 and e[-1] == 102 for e in excerpts)


def test_help_explains_the_modes():
    p = run("--help")
    assert p.returncode == 0
    for words in ("--tokenizer MODEL_DIR", "--from-ids IDS", "--synthetic", "AutoTokenizer.from_pretrained",
                  "pip install transformers", "NOT text"):
        assert words in p.stdout, words
    assert run("--from-ids", "x", "text.txt", "-o", "y").returncode == 2  # TEXT only with --tokenizer
