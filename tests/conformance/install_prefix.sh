#!/bin/sh
# A relocatable install, as an operator makes one after a default configure:
#   cmake --install BUILD --prefix DIR
# then, with nothing in the environment pointing into DIR but PKG_CONFIG_PATH:
#  - tidemark-sdk.pc gives DIR's include directory (not the configured
#    prefix) and an out-of-tree plugin builds with its --cflags alone;
#  - the installed tidemark finds the installed plugins (`plugins`,
#    `validate`), and the installed tidemark-sinkcheck finds them by name
#    and finds the out-of-tree one with --plugin-dir;
#  - the installed tidemark's `table` runs the table tool installed beside
#    it (tidemark-iceberg), not another one;
#  - the same after the whole tree is moved elsewhere.
# usage: install_prefix.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -u
build=$1 src=$2 work=$3
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd -P) || exit 1
chmod 0755 "$work" || exit 1
unset TIDEMARK_PLUGIN_PATH PKG_CONFIG_SYSROOT_DIR DESTDIR

if ! cmake --install "$build" --prefix "$work/a" >"$work/install.log" 2>&1; then
    cat "$work/install.log"
    echo "FAIL: cmake --install --prefix failed"
    exit 1
fi
# libdir may be lib, lib64 or lib/x86_64-linux-gnu (GNUInstallDirs): as
# installed, relative to the prefix.
pc=$(cd "$work/a" && find . -name tidemark-sdk.pc -path '*/pkgconfig/*')
[ "$(printf '%s\n' "$pc" | grep -c .)" -eq 1 ] || {
    echo "FAIL: not exactly one tidemark-sdk.pc installed: $pc"
    exit 1
}
libdir=$(dirname "$(dirname "${pc#./}")")
plugindir=$libdir/tidemark/plugins

# check PREFIX: everything above against the tree at PREFIX.
check() {
    p=$1
    pcdir=$p/$libdir/pkgconfig
    # pkg-config's own answers, resolved: they must point into this tree.
    inc=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=includedir tidemark-sdk)
    [ -f "$inc/tidemark/sink.h" ] && [ "$(cd "$inc" && pwd -P)" = "$p/include" ] ||
        fail "$p: pkg-config includedir is '$inc', expected $p/include"
    pdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=plugindir tidemark-sdk)
    [ -d "$pdir" ] && [ "$(cd "$pdir" && pwd -P)" = "$p/$plugindir" ] ||
        fail "$p: pkg-config plugindir is '$pdir', expected $p/$plugindir"

    # An out-of-tree plugin, built with the installed .pc only.
    rm -rf "$work/oot" && mkdir -m 0755 "$work/oot" || exit 1
    cflags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags tidemark-sdk)
    # The example uses the store helpers: libtidemark-store.a of this tree.
    libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs tidemark-sdk)
    # shellcheck disable=SC2086 # cflags and libs are lists of flags
    if ! cc $cflags -shared -fPIC -o "$work/oot/example_file.so" \
        "$src/sdk/examples/file_sink.c" $libs 2>"$work/cc.err"; then
        cat "$work/cc.err"
        fail "$p: the example does not build with 'cc $cflags ... $libs'"
    fi
    chmod 0755 "$work/oot/example_file.so" 2>/dev/null

    # The installed binaries find the installed plugins, from anywhere.
    (cd / && "$p/bin/tidemark" plugins) >"$work/plugins.out" 2>&1 ||
        fail "$p: tidemark plugins: exit $? ($(cat "$work/plugins.out"))"
    for name in sqlite postgres iceberg_lite example_file; do
        grep -Eq "^$name +.* ok +$p/$plugindir/$name\\.so\$" "$work/plugins.out" ||
            fail "$p: tidemark plugins does not list $p/$plugindir/$name.so as ok"
    done
    "$p/bin/tidemark" plugins --help | grep -qF "then $p/$plugindir." ||
        fail "$p: tidemark plugins --help does not name $p/$plugindir"
    mkdir -p "$work/run/var/demo" || exit 1
    (cd "$work/run" && KAFKA_BOOTSTRAP=localhost:9092 "$p/bin/tidemark" validate \
        "$src/configs/wikimedia-to-sqlite.json") >"$work/validate.out" 2>&1 ||
        fail "$p: tidemark validate: $(cat "$work/validate.out")"
    # `tidemark table` runs this tree's tool: its own refusal of a
    # directory that is no table names the path, exit 1.
    mkdir -p "$work/notatable" || exit 1
    (cd / && "$p/bin/tidemark" table history "$work/notatable") >"$work/table.out" 2>&1
    rc=$?
    [ -x "$p/bin/tidemark-iceberg" ] && [ "$rc" -eq 1 ] &&
        grep -qF "tidemark table: $work/notatable/metadata: not a table" "$work/table.out" ||
        fail "$p: tidemark table history (exit $rc): $(cat "$work/table.out")"
    kit=$p/bin/tidemark-sinkcheck
    (cd / && "$kit" example_file --config "$src/tests/conformance/example_file.json" \
        --case claim) >"$work/kit.out" 2>&1 ||
        fail "$p: sinkcheck example_file: $(cat "$work/kit.out")"
    grep -qF "($p/$plugindir/example_file.so)" "$work/kit.out" ||
        fail "$p: sinkcheck did not load the installed example_file: $(head -1 "$work/kit.out")"
    (cd "$work" && "$kit" example_file --plugin-dir oot \
        --config "$src/tests/conformance/example_file.json" --case claim \
        --case contiguous_batch) >"$work/kit.out" 2>&1 ||
        fail "$p: sinkcheck --plugin-dir: $(cat "$work/kit.out")"
    grep -qF "($work/oot/example_file.so)" "$work/kit.out" ||
        fail "$p: sinkcheck --plugin-dir did not load the out-of-tree plugin: $(head -1 "$work/kit.out")"
}

check "$work/a"
mv "$work/a" "$work/moved" || exit 1
check "$work/moved"

[ "$failed" -eq 0 ] && echo "install_prefix: all passed"
exit "$failed"
