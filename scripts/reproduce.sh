#!/usr/bin/env bash
# Reproduce a figure of the seed papers from scratch: run its sweep (jobs/examples/) on the
# available cores and draw it with scripts/rcsweep-plot. `all` does every registered figure and
# writes the HTML report. See docs/FIGURES.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=/usr/bin/python3
if [[ -x "$HERE/rcsweep" ]]; then  # installed as P/bin/rcsweep-reproduce (cmake --install)
    BIN="${RCSWEEP_BIN:-$HERE/rcsweep}"
    PLOT="$HERE/rcsweep-plot"
    PYPATH="$HERE/../lib/rcsweep/python"
    SWEEPS="$HERE/../share/rcsweep/jobs/examples"
else                               # a checkout: scripts/reproduce.sh
    BIN="${RCSWEEP_BIN:-$HERE/../build/rcsweep}"
    PLOT="$HERE/rcsweep-plot"
    PYPATH="$HERE"
    SWEEPS="$HERE/../jobs/examples"
fi
MPIEXEC="${MPIEXEC:-mpiexec}"
OUT="out"
REPORT=""
FORCE=0

usage() {
    cat <<EOF
Usage: rcsweep-reproduce [OPTIONS] FIGURE[,FIGURE...]|all [RANKS]   (installed)
       scripts/reproduce.sh [OPTIONS] FIGURE[,FIGURE...]|all [RANKS]  (a checkout)

Runs the sweep of each FIGURE (the file jobs/examples/<sweep> named by the figure registry) into
OUT/<sweep>.h5 with RANKS MPI ranks (default: nproc = $(nproc)), then draws OUT/<FIGURE>.png with
scripts/rcsweep-plot. A store that is already finished for the same sweep file (same plan hash, no
task pending) is not run again; an unfinished one is resumed; one of another version of the sweep
file is replaced. 'all' does every registered figure and writes REPORT/index.html (default
report/): every figure, its sweep file and its store's provenance. The encoder figures
(mtg-fig3, -fig8, -fig9, -fig11, dong-fig2-encoders, ls-fig2-albert) run the published models'
sizes at their initialisation: longer than the others (docs/FIGURES.md "Encoders").

Options:
  -o, --out DIR      stores and PNGs (default: out/ in the current directory)
  --report DIR       also write the HTML report there (default for 'all': report/ in the current directory)
  --sweeps DIR       take the sweep files from DIR instead of jobs/examples/ (same file names; the
                     encoder figures' sweeps also read DIR/models/ and DIR/tokens/, or the paths
                     their model_folder and input_path give)
  --force            rerun the sweeps even when their stores are up to date (--overwrite)
  --list             list the figures and their sweep files, then exit
  -h, --help         this help

Environment: RCSWEEP_BIN (default: the installed rcsweep next to this command, or the checkout's
build/rcsweep), MPIEXEC (default mpiexec).
Exit codes: 0 done; 1 a sweep or a figure failed; 2 usage error (unknown figure, bad RANKS).
Figures:
EOF
    figures | sed 's/^/  /'
}

die() { echo "reproduce.sh: $*" >&2; exit 2; }

# "name sweep" per registered figure
figures() {
    PYTHONPATH="$PYPATH" MPLBACKEND=Agg "$PY" -c '
from rcsweep_tools.figures import FIGURES
for f in FIGURES.values():
    print(f.name, f.sweep)'
}

ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --list) figures; exit 0 ;;
        -o|--out) [[ $# -ge 2 ]] || die "$1 needs a folder"; OUT="$2"; shift 2 ;;
        --report) [[ $# -ge 2 ]] || die "$1 needs a folder"; REPORT="$2"; shift 2 ;;
        --sweeps) [[ $# -ge 2 ]] || die "$1 needs a folder"; SWEEPS="$2"; shift 2 ;;
        --force) FORCE=1; shift ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
[[ ${#ARGS[@]} -ge 1 && ${#ARGS[@]} -le 2 ]] || die "give FIGURE|all and optionally RANKS (see --help)"
WANT="${ARGS[0]}"
RANKS="${ARGS[1]:-$(nproc)}"
[[ "$RANKS" =~ ^[1-9][0-9]*$ ]] || die "RANKS must be a positive integer, got '$RANKS'"

declare -A SWEEP_OF=()
ORDER=()
while read -r name sweep; do
    SWEEP_OF[$name]="$sweep"
    ORDER+=("$name")
done < <(figures)
[[ ${#ORDER[@]} -gt 0 ]] || { echo "reproduce.sh: no figures registered (scripts/rcsweep_tools/figures)" >&2; exit 1; }

if [[ "$WANT" == all ]]; then
    SELECTED=("${ORDER[@]}")
    REPORT="${REPORT:-report}"
else
    IFS=',' read -r -a SELECTED <<< "$WANT"
    for name in "${SELECTED[@]}"; do
        [[ -n "${SWEEP_OF[$name]+x}" ]] || die "unknown figure '$name'; known: ${ORDER[*]} (or 'all')"
    done
fi

[[ -x "$BIN" ]] || die "no rcsweep binary at $BIN (build it: bash scripts/build.sh, or set RCSWEEP_BIN)"
[[ -d "$SWEEPS" ]] || die "--sweeps: no folder $SWEEPS"

MPI=()
if [[ "$RANKS" -gt 1 ]]; then
    MPI=("$MPIEXEC" -n "$RANKS" --oversubscribe)
    [[ "$(id -u)" -eq 0 ]] && MPI+=(--allow-run-as-root)
fi
mkdir -p "$OUT"

# run_sweep FILE STORE: make STORE up to date with FILE; returns non-zero on failure
run_sweep() {
    local file="$1" store="$2" hash args=()
    [[ -f "$file" ]] || { echo "reproduce.sh: no sweep file $file" >&2; return 1; }
    hash="$("$BIN" plan "$file" | sed -n 's/.*(plan \([0-9a-f]\{16\}\).*/\1/p' | head -n 1)" || true
    [[ -n "$hash" ]] || { echo "reproduce.sh: rcsweep plan $file failed" >&2; "$BIN" plan "$file" >&2 || true; return 1; }
    if [[ "$FORCE" -eq 0 && -f "$store" ]] &&
       PYTHONPATH="$PYPATH" "$PY" -m rcsweep_tools.report uptodate "$store" "$hash"; then
        echo "== $(basename "$file"): $store is up to date (plan $hash), not run again"
        return 0
    fi
    if [[ -f "$store" ]]; then
        if [[ "$FORCE" -eq 1 ]] || ! "$PY" - "$store" "$hash" <<'EOF'
import sys, h5py
try:
    with h5py.File(sys.argv[1], "r", locking=False) as f:
        sys.exit(0 if f.attrs.get("plan_hash") == sys.argv[2] else 1)
except OSError:
    sys.exit(1)
EOF
        then
            echo "== $(basename "$file"): $store was made by another version of the sweep file (or is damaged): replaced"
            args+=(--overwrite)
        else
            echo "== $(basename "$file"): resuming $store"
        fi
    fi
    echo "== $(basename "$file"): ${MPI[*]:-} $BIN run $file -o $store ${args[*]:-}"
    local rc=0
    "${MPI[@]}" "$BIN" run "$file" -o "$store" "${args[@]}" || rc=$?
    case "$rc" in
        0) ;;
        3) echo "   (some tasks failed: recorded in the store; the figure draws the others)" ;;
        *) echo "reproduce.sh: rcsweep run $file exited with $rc" >&2; return 1 ;;
    esac
}

declare -A DONE_SWEEP=()
FAILED=()
for name in "${SELECTED[@]}"; do
    sweep="${SWEEP_OF[$name]}"
    store="$OUT/${sweep%.toml}.h5"
    if [[ -z "${DONE_SWEEP[$sweep]+x}" ]]; then
        if run_sweep "$SWEEPS/$sweep" "$store"; then DONE_SWEEP[$sweep]=ok; else DONE_SWEEP[$sweep]=failed; fi
    fi
    if [[ "${DONE_SWEEP[$sweep]}" != ok ]]; then
        FAILED+=("$name"); rm -f "$OUT/$name.png"; continue
    fi
    if MPLBACKEND=Agg "$PY" "$PLOT" "$store" "$name" -o "$OUT/$name.png"; then
        echo "== $name: $OUT/$name.png"
    else
        echo "reproduce.sh: drawing $name from $store failed" >&2
        FAILED+=("$name"); rm -f "$OUT/$name.png"
    fi
done

if [[ -n "$REPORT" ]]; then
    rc=0
    PYTHONPATH="$PYPATH" MPLBACKEND=Agg "$PY" -m rcsweep_tools.report build --out "$REPORT" \
        --stores "$OUT" --figures "$OUT" --sweeps "$SWEEPS" "${SELECTED[@]}" || rc=$?
    # 1: some figure is missing from the page (already counted in FAILED); anything else: no page
    if [[ "$rc" -ne 0 && ( "$rc" -ne 1 || ${#FAILED[@]} -eq 0 ) ]]; then
        echo "reproduce.sh: writing the report $REPORT/index.html failed" >&2
        FAILED+=(report)
    fi
fi
if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "reproduce.sh: failed: ${FAILED[*]}" >&2
    exit 1
fi
