# shellcheck shell=bash
# Source me: the jars of a Kafka Connect worker and its Debezium plugins, fetched from Maven
# Central into <repo>/.cache/connect by the poms beside this file. Used by tests/cdc/lib.sh
# (the Debezium replication test and tests/bench/debezium_peer.sh) and
# tests/bench/connect_peer.sh.
#
# Needs ROOT (the repository) set and say/die defined by the caller. Sets:
#   CONNECT_LIBS    the worker's class path folder (pom.xml)
#   CONNECT_PLUGINS the plugin.path: debezium-connector-jdbc (plugin-pom.xml) and
#                   debezium-connector-postgres (source-pom.xml), one folder each

CONNECT_CACHE="$ROOT/.cache/connect"
CONNECT_LIBS="$CONNECT_CACHE/libs"
CONNECT_PLUGINS="$CONNECT_CACHE/plugins"

connect_sum() { sha256sum "$1" | cut -d' ' -f1; }

# mvn dependency:copy-dependencies of a pom into a folder, once per version of the pom: the
# folder's .complete holds the pom's sha256 (a changed pom fetches again; a failed fetch
# leaves no .complete, so the next run retries).
connect_mvn_copy() { # pom outdir extra-args...
  local pom="$1" out="$2"; shift 2
  [ -f "$out/.complete" ] && [ "$(cat "$out/.complete")" = "$(connect_sum "$pom")" ] && return 0
  command -v mvn >/dev/null || die "mvn not found (run scripts/install-deps.sh)"
  say "fetching $(basename "$pom") jars from Maven Central into $out"
  rm -rf "$out.tmp.$$"; mkdir -p "$(dirname "$out")"
  local log="$out.mvn.log"
  { mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
      "$@" -DoutputDirectory="$out.tmp.$$" </dev/null 2>&1 || echo "__MVN_FAILED__"; } \
    | sed 's/\x1b\[[0-9;]*m//g' | { grep -v '^$' || true; } > "$log"
  ! grep -q __MVN_FAILED__ "$log" || { cat "$log" >&2; die "mvn dependency:copy-dependencies failed for $pom"; }
  connect_sum "$pom" > "$out.tmp.$$/.complete"
  rm -rf "$out"; mv "$out.tmp.$$" "$out"
}

# The worker, then each plugin in a folder of its own without the Kafka, SLF4J and Jackson
# core jars the worker provides (plugin-pom.xml says why Jackson must not be doubled).
connect_fetch() { # plugin-pom-name...  (plugin-pom.xml, source-pom.xml)
  connect_mvn_copy "$ROOT/scripts/connect/pom.xml" "$CONNECT_LIBS"
  ls "$CONNECT_LIBS"/connect-runtime-*.jar >/dev/null 2>&1 || die "no connect-runtime jar in $CONNECT_LIBS"
  local p dir
  for p in "$@"; do
    case "$p" in
      plugin-pom.xml) dir=debezium-connector-jdbc ;;
      source-pom.xml) dir=debezium-connector-postgres ;;
      *) die "connect_fetch: unknown pom $p" ;;
    esac
    connect_mvn_copy "$ROOT/scripts/connect/$p" "$CONNECT_PLUGINS/$dir" \
      -DexcludeGroupIds=org.apache.kafka,org.slf4j,com.fasterxml.jackson.core
    ls "$CONNECT_PLUGINS/$dir/$dir"-*.jar >/dev/null 2>&1 || die "no $dir jar in $CONNECT_PLUGINS/$dir"
  done
}
