#!/usr/bin/python3
"""Write a token ids file, the input of rcsweep's encoders (docs/ENCODERS.md "Token files"): one
excerpt per line, its token ids as non-negative decimal integers separated by blanks; lines starting
with '#' are comments.

    scripts/write_token_ids.py --tokenizer MODEL_DIR TEXT -o tokens.txt [--max-length 128]
        one excerpt per non-blank line of TEXT, tokenized by the model's own tokenizer
        (transformers.AutoTokenizer.from_pretrained(MODEL_DIR): tokenizer.json or vocab.txt and
        tokenizer_config.json in the folder), special tokens added ([CLS] ... [SEP] for BERT,
        <s> ... </s> for RoBERTa), cut to --max-length tokens (the tokenizer keeps the closing token)
    scripts/write_token_ids.py --from-ids IDS -o tokens.txt [--max-length N] [--vocab-size V]
        an existing ids file checked by rcsweep's rules (every token a decimal integer from 0 to
        2^53, at least one excerpt) and rewritten one blank between ids, comments kept, blank lines
        dropped; --max-length keeps each excerpt's first N ids, --vocab-size refuses an id >= V
    scripts/write_token_ids.py --synthetic 32 --seed 0 --max-length 128 -o tokens.txt
        synthetic excerpts for the BERT vocabulary, NOT text: [CLS] (101), ids drawn uniformly from
        1996 to 29611 (bert-base-uncased's words and word pieces past its special tokens, unused
        slots and single characters), [SEP] (102); lengths uniform from 8 to --max-length; NumPy's
        default_rng(seed). What jobs/examples/tokens/excerpts.txt was written with.

--tokenizer needs the transformers package (pip install transformers; it is not a dependency of
rcsweep and Debian does not package it); the other modes need only Python (--synthetic: NumPy).
The output is written under a temporary name and renamed. Exit 0 on success, 2 on bad input or a
missing transformers.
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

MAX_TOKEN_ID = 2 ** 53  # src/checkpoint/token_file.hpp max_token_id
CLS, SEP, FIRST_WORD, LAST_WORD = 101, 102, 1996, 29611  # bert-base-uncased's vocabulary
MIN_SYNTHETIC = 8
MAX_LINE, MAX_EXCERPTS = 2 ** 20, 2 ** 20  # token_file.hpp TokenFileLimits


class TokenError(Exception):
    """Bad input: printed as `error: ...`, exit code 2."""


def parse_ids(text, name):
    """[(kind, value)] of an ids file's lines: ("comment", line) or ("ids", [int]), blank lines
    dropped; TokenError naming the file, line and column of a bad token."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip(" \t\r\v\f")
        if not stripped:
            continue
        if stripped.startswith("#"):
            out.append(("comment", stripped))
            continue
        ids, column = [], 0
        for token in stripped.split():
            column = line.index(token, column) + 1
            if not token.isascii() or not token.isdigit():
                raise TokenError(f"{name}: line {number}, column {column}: token {token[:32]!r} is not a token id "
                                 "(a non-negative decimal integer)")
            value = int(token)
            if value > MAX_TOKEN_ID:
                raise TokenError(f"{name}: line {number}, column {column}: token {token[:32]!r} is above 2^53")
            ids.append(value)
            column += len(token) - 1
        out.append(("ids", ids))
    if not any(kind == "ids" for kind, _ in out):
        raise TokenError(f"{name}: holds no excerpt: it is empty or every line is blank or a comment")
    return out


def format_lines(lines):
    """The file's text; TokenError when rcsweep would refuse it for its size (TokenFileLimits)."""
    text = [value if kind == "comment" else " ".join(map(str, value)) for kind, value in lines]
    if sum(kind == "ids" for kind, _ in lines) > MAX_EXCERPTS:
        raise TokenError(f"more than {MAX_EXCERPTS} excerpts, the most a token file may hold")
    for number, line in enumerate(text, 1):
        if len(line) > MAX_LINE:
            raise TokenError(f"line {number} would be longer than {MAX_LINE} characters, the longest a token "
                             "file may have: use --max-length")
    return "".join(line + "\n" for line in text)


def from_ids(path, max_length=None, vocab_size=None):
    lines = parse_ids(Path(path).read_text(encoding="utf-8", errors="replace"), str(path))
    out = []
    for kind, value in lines:
        if kind == "ids":
            if vocab_size is not None:
                bad = [i for i in value if i >= vocab_size]
                if bad:
                    raise TokenError(f"{path}: id {bad[0]} is not below the vocabulary size {vocab_size}")
            value = value[:max_length] if max_length else value
        out.append((kind, value))
    return out


def from_tokenizer(model_dir, text_path, max_length):
    try:
        from transformers import AutoTokenizer  # imported here: not needed by the other modes
    except ImportError:
        raise TokenError("--tokenizer needs the transformers package, which is not installed (pip install "
                         "transformers; it is not a dependency of rcsweep); --from-ids and --synthetic need "
                         "only Python") from None
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    texts = [t.strip() for t in Path(text_path).read_text(encoding="utf-8").splitlines() if t.strip()]
    if not texts:
        raise TokenError(f"{text_path}: holds no text (every line is blank)")
    out = [("comment", f"# token ids of {Path(text_path).name}, one excerpt per line, by the tokenizer of "
                       f"{Path(model_dir).name}, at most {max_length} tokens")]
    for text in texts:
        ids = tokenizer(text, truncation=True, max_length=max_length, add_special_tokens=True)["input_ids"]
        out.append(("ids", [int(i) for i in ids]))
    return out


def synthetic(count, seed, max_length, output):
    import numpy as np
    if max_length < MIN_SYNTHETIC:
        raise TokenError(f"--synthetic needs --max-length of at least {MIN_SYNTHETIC}")
    rng = np.random.default_rng(seed)
    out = [("comment", f"# SYNTHETIC token ids, not text: {count} excerpts of [CLS]=101, ids uniform in "
                       f"{FIRST_WORD}..{LAST_WORD} of the bert-base-uncased vocabulary, [SEP]=102; lengths "
                       f"uniform in {MIN_SYNTHETIC}..{max_length}"),
           ("comment", f"# written by: scripts/write_token_ids.py --synthetic {count} --seed {seed} "
                       f"--max-length {max_length} -o {output}")]
    for _ in range(count):
        n = int(rng.integers(MIN_SYNTHETIC, max_length + 1))
        words = rng.integers(FIRST_WORD, LAST_WORD + 1, size=n - 2)
        out.append(("ids", [CLS, *map(int, words), SEP]))
    return out


def write_atomically(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a new file's usual mode, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--tokenizer", metavar="MODEL_DIR", help="a Hugging Face model or tokenizer folder")
    mode.add_argument("--from-ids", metavar="IDS", help="an existing token ids file to check and rewrite")
    mode.add_argument("--synthetic", metavar="N", type=int, help="N synthetic excerpts for the BERT vocabulary")
    parser.add_argument("text", nargs="?", help="with --tokenizer: the text, one excerpt per non-blank line")
    parser.add_argument("-o", "--output", required=True, help="the token ids file to write")
    parser.add_argument("--max-length", type=int, help="most tokens per excerpt (--tokenizer: default 512)")
    parser.add_argument("--vocab-size", type=int, help="--from-ids: refuse ids not below this")
    parser.add_argument("--seed", type=int, default=0, help="--synthetic: NumPy's seed (default 0)")
    args = parser.parse_args(argv)
    try:
        if args.max_length is not None and args.max_length < 1:
            raise TokenError("--max-length must be at least 1")
        if args.tokenizer is not None:
            if args.text is None:
                raise TokenError("--tokenizer needs the TEXT file")
            lines = from_tokenizer(args.tokenizer, args.text, args.max_length or 512)
        elif args.text is not None:
            raise TokenError(f"TEXT ({args.text}) is for --tokenizer only")
        elif args.from_ids is not None:
            lines = from_ids(args.from_ids, args.max_length, args.vocab_size)
        else:
            if args.synthetic < 1:
                raise TokenError("--synthetic needs at least 1 excerpt")
            lines = synthetic(args.synthetic, args.seed, args.max_length or 128, args.output)
        write_atomically(args.output, format_lines(lines))
    except (TokenError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
