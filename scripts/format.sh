#!/usr/bin/env bash
# Format the C and C++ sources with clang-format and the repository's .clang-format.
#   bash scripts/format.sh [FILE...]            format FILEs in place (default: every tracked
#                                               .c/.cpp/.hpp/.h file under src/, tests/, bench/)
#   bash scripts/format.sh --check [FILE...]    change nothing; list the files that would change
#                                               and how many lines, exit 1 if any would
#   bash scripts/format.sh --changed [--check]  only the C/C++ files changed against HEAD
# CLANG_FORMAT=clang-format-16 picks another clang-format (14 or later).
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
command -v "$cf" >/dev/null || { echo "format: $cf not found (apt-get install clang-format)" >&2; exit 2; }

check=0 changed=0 files=()
for a in "$@"; do
  case $a in
    --check) check=1 ;;
    --changed) changed=1 ;;
    -h|--help) sed -n '2,8s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "format: unknown option $a" >&2; exit 2 ;;
    *) files+=("$a") ;;
  esac
done
pattern=('src/*.cpp' 'src/*.hpp' 'src/*.c' 'src/*.h' 'tests/*.cpp' 'tests/*.hpp' 'tests/*.c' 'tests/*.h'
         'bench/*.cpp' 'bench/*.hpp' 'bench/*.c')
if ((changed)); then
  mapfile -t files < <({ git diff --name-only --diff-filter=d HEAD -- "${pattern[@]}";
                         git ls-files --others --exclude-standard -- "${pattern[@]}"; } | sort -u)
elif ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files -- "${pattern[@]}")
fi
((${#files[@]})) || { echo "format: no files"; exit 0; }

if ((check == 0)); then
  "$cf" -i --style=file "${files[@]}"
  echo "format: ${#files[@]} files formatted with $("$cf" --version | grep -o 'version [0-9.]*')"
  exit 0
fi
n_files=0 n_lines=0
for f in "${files[@]}"; do
  # Lines of the file that formatting would replace or remove.
  d=$("$cf" --style=file "$f" | diff "$f" - || true)
  if [[ -n $d ]]; then
    n=$(grep -c '^<' <<< "$d" || true)
    echo "$f: $n lines"
    n_files=$((n_files + 1)) n_lines=$((n_lines + n))
  fi
done
echo "format: $n_lines lines in $n_files of ${#files[@]} files would change"
((n_files == 0))
