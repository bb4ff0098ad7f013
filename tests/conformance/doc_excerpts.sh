#!/bin/sh
# The guide must never drift from the code: every ```c block of
# docs/writing-a-sink.md must appear, line for line and contiguously, in
# sdk/examples/file_sink.c.
#
# usage: doc_excerpts.sh SOURCE_DIR
set -eu
src=$1
awk -v doc="$src/docs/writing-a-sink.md" '
    # First file: the example source, one line per array slot.
    FNR == NR { code[++n] = $0; next }
    /^```c$/ { inblock = 1; m = 0; start = FNR; next }
    inblock && /^```$/ {
        inblock = 0; blocks++
        found = 0
        for (i = 1; i + m - 1 <= n && !found; i++) {
            ok = 1
            for (j = 1; j <= m && ok; j++)
                if (code[i + j - 1] != block[j]) ok = 0
            found = ok
        }
        if (!found) {
            printf "%s:%d: excerpt not found in the example:\n", doc, start
            for (j = 1; j <= m; j++) print "    | " block[j]
            bad++
        }
        next
    }
    inblock { block[++m] = $0 }
    END {
        if (blocks == 0) { print "no ```c excerpts found"; exit 1 }
        if (bad) exit 1
        printf "%d excerpts match the example\n", blocks
    }
' "$src/sdk/examples/file_sink.c" "$src/docs/writing-a-sink.md"
