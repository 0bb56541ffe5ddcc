#!/bin/bash
# The instructions of one analyze_path of FILE by the reader of TREE: callgrind's count for two reads in one process
# minus its count for one (the import and the first read's cold memos cancel out).
#     bash instructions.sh TREE FILE [OUT_PREFIX]     # OUT_PREFIX: keep both profiles for c_breakdown.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$(python -c "import sys; print(sys.executable)")  # the interpreter itself, not a pyenv shim
out=${3:-}
count() {
    local file=/dev/null
    [ -n "$out" ] && file="$out.$1"
    valgrind --tool=callgrind --callgrind-out-file="$file" "$py" "$here/once.py" "$TREE" "$FILE" "$1" 2>&1 |
        awk '/Collected/ {print $4}'
}
TREE=$1 FILE=$2
one=$(count 1)
two=$(count 2)
echo "$TREE $((two - one))"
