#!/bin/sh
# The host links no plugin code: `tidemark table` runs the table tool
# tidemark-iceberg installed beside the binary (host/cli/cmd_table.c).
#   - no symbol the iceberg-lite table library defines is in the tidemark
#     binary (its symbol table, which keeps the hidden ones as locals), and
#     tidemark needs neither libzstd nor libsnappy (only that code does);
#     inconclusive (a failure) unless nm sees the host's own symbols in
#     tidemark and the library's in the tool, so an empty answer means
#     absent, not unreadable;
#   - a copy of tidemark in a directory of its own runs the tool beside it
#     (found relative to the binary, as plugins are) and, without one, says
#     which file it could not run, exit 1.
#   host_links_none.sh TIDEMARK TOOL LIBICEBERG_LITE_TABLE
set -u
TM=$1 TOOL=$2 LIB=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for t in nm readelf; do
    command -v $t >/dev/null 2>&1 || { echo "FAIL: $t is missing"; exit 1; }
done
DIR=$(mktemp -d) || exit 1
trap 'rm -rf "$DIR"' EXIT

nm --defined-only "$TM" | awk '{print $NF}' | sort -u >"$DIR/host"
nm --defined-only "$TOOL" | awk '{print $NF}' | sort -u >"$DIR/tool"
nm -g --defined-only "$LIB" 2>/dev/null | awk 'NF == 3 {print $3}' |
    sort -u >"$DIR/lib"
grep -qx tm_cmd_run "$DIR/host" ||
    { echo "FAIL: inconclusive: nm lists no tm_cmd_run in $TM"; exit 1; }
grep -qx ice_compact "$DIR/lib" ||
    { echo "FAIL: inconclusive: nm lists no ice_compact in $LIB"; exit 1; }
grep -qx ice_compact "$DIR/tool" ||
    { echo "FAIL: inconclusive: nm lists no ice_compact in $TOOL"; exit 1; }
comm -12 "$DIR/host" "$DIR/lib" >"$DIR/both"
if [ -s "$DIR/both" ]; then
    bad "tidemark holds $(wc -l <"$DIR/both") symbols of the iceberg-lite" \
        "table library, e.g. $(head -5 "$DIR/both" | tr '\n' ' ')"
else
    echo "ok: none of the library's $(wc -l <"$DIR/lib") symbols in tidemark"
fi
needed=$(readelf -d "$TM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
case $needed in
*libzstd* | *libsnappy*) bad "tidemark needs the Parquet codecs: $(echo $needed)" ;;
*) echo "ok: tidemark needs $(echo $needed)" ;;
esac

# Relative to the binary: a copy with the tool beside it, then without.
mkdir "$DIR/bin" && cp "$TM" "$TOOL" "$DIR/bin/" || exit 1
out=$("$DIR/bin/tidemark" table --help 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -q '^usage: tidemark table scan'; then
    bad "tidemark table --help beside the tool: exit $rc: $out"
else
    echo "ok: tidemark table runs the tool beside it"
fi
rm "$DIR/bin/tidemark-iceberg"
out=$("$DIR/bin/tidemark" table history "$DIR" 2>&1)
rc=$?
want="tidemark table: cannot run the iceberg-lite table tool $DIR/bin/tidemark-iceberg: No such file or directory"
if [ $rc -ne 1 ] || ! printf '%s\n' "$out" | grep -qF "$want"; then
    bad "without the tool: exit $rc (want 1): $out"
else
    echo "ok: without the tool: exit 1, $out"
fi
exit $fail
