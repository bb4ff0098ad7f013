#!/bin/sh
# Builds the example sink the way an author out of tree does: install the
# build tree, then compile sdk/examples/file_sink.c with nothing but
#   cc $(pkg-config --cflags tidemark-sdk) -shared -fPIC ... \
#      $(pkg-config --libs tidemark-sdk)
# and run the INSTALLED tidemark-sinkcheck against the result.
#
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR CONFIG_JSON
#
# The install is staged with DESTDIR (the install prefix stays what the build
# was configured with, as a packager stages it); PKG_CONFIG_SYSROOT_DIR makes
# pkg-config point -I into the staged tree, so this works whether or not the
# .pc file's paths are relative to ${prefix}.
set -eu

build=$1
src=$2
config=$3

stage=$(mktemp -d "${TMPDIR:-/tmp}/tm-out-of-tree.XXXXXX")
trap 'rm -rf "$stage"' EXIT INT TERM

DESTDIR="$stage/root" cmake --install "$build" >"$stage/install.log" 2>&1 || {
    cat "$stage/install.log" >&2
    echo "out_of_tree: cmake --install failed" >&2
    exit 1
}

# libdir may be lib, lib64 or lib/x86_64-linux-gnu (GNUInstallDirs): find it.
pc=$(find "$stage/root" -name tidemark-sdk.pc -path '*/pkgconfig/*' | head -n 1)
if [ -z "$pc" ]; then
    echo "out_of_tree: tidemark-sdk.pc was not installed" >&2
    exit 1
fi
kit=$(find "$stage/root" -name tidemark-sinkcheck -type f | head -n 1)
if [ -z "$kit" ] || [ ! -x "$kit" ]; then
    echo "out_of_tree: tidemark-sinkcheck was not installed" >&2
    exit 1
fi

cflags=$(PKG_CONFIG_SYSROOT_DIR="$stage/root" \
         PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags tidemark-sdk)
libs=$(PKG_CONFIG_SYSROOT_DIR="$stage/root" \
       PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --libs tidemark-sdk)
echo "out_of_tree: cc $cflags -shared -fPIC -o example.so file_sink.c $libs"
# The plugin directory must not be group/other-writable for the loader.
mkdir -m 0755 "$stage/plugin"
# shellcheck disable=SC2086 # cflags and libs are lists of flags
cc $cflags -shared -fPIC -o "$stage/plugin/example.so" \
    "$src/sdk/examples/file_sink.c" $libs
chmod 0755 "$stage/plugin/example.so"

# The example has no business-key dedup nor deletes: its dedup and cdc
# cases must SKIP.
"$kit" "$stage/plugin/example.so" --config "$config" --expect-skip dedup \
    --expect-skip cdc --expect-skip schema_columns
