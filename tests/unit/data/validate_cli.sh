#!/bin/sh
# `tidemark validate` end to end: the shipped configs pass with the sqlite
# plugin of the build tree (TIDEMARK_PLUGIN_PATH, set by ctest), a broken
# config fails with exactly the expected lines (secrets redacted), and
# usage errors exit 2.
# usage: validate_cli.sh TIDEMARK_BINARY SOURCE_DIR WORK_DIR
set -u
bin=$1 src=$2 work=$3
data=$src/tests/unit/data
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work/var/demo" || exit 1

# The shipped configs (their sqlite paths are relative: var/demo/...).
(cd "$work" && KAFKA_BOOTSTRAP=localhost:9092 "$bin" validate "$src/configs/orders-to-sqlite.json" \
    "$src/configs/wikimedia-to-sqlite.json") >"$work/ok.out" 2>&1
rc=$?
cat "$work/ok.out"
[ "$rc" -eq 0 ] || fail "shipped configs: exit $rc, expected 0"
[ "$(grep -c ': OK (' "$work/ok.out")" -eq 2 ] || fail "shipped configs: no two OK lines"

# The broken one: every error, exactly, and no secret.
(cd "$data" && env -u TM_VALIDATE_TEST_UNSET TM_VALIDATE_TEST_SECRET=hunter2 \
    "$bin" validate broken-connector.json) >"$work/broken.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "broken config: exit $rc, expected 2"
if ! diff -u "$data/broken-connector.expected" "$work/broken.out"; then
    fail "broken config: output differs from broken-connector.expected"
fi
if grep -q hunter2 "$work/broken.out"; then
    fail "broken config: the secret shows in the output"
fi

# The host refuses dedup for a plugin without TM_CAP_DEDUP; the plugin's
# own validate() refuses its bad settings. Both in one run: exit 2.
(cd "$data" && "$bin" validate dedup-no-capability.json \
    sqlite-bad-settings.json) >"$work/plugin.out" 2>&1
rc=$?
cat "$work/plugin.out"
[ "$rc" -eq 2 ] || fail "plugin checks: exit $rc, expected 2"
grep -q '^dedup-no-capability.json: \$.dedup: plugin "example_file" (.*example_file.so) cannot dedup: it lacks the dedup capability (TM_CAP_DEDUP); remove \$.dedup or use another sink$' \
    "$work/plugin.out" || fail "dedup without TM_CAP_DEDUP: no refusal line"
grep -qx 'sqlite-bad-settings.json: $.sink: plugin "sqlite" refused the config (INVALID): $.sink.settings.tabel: unknown setting (did you mean "table"?)' \
    "$work/plugin.out" || fail "sqlite validate: no refusal line"

# The host refuses a change-data-capture mapping for a plugin without
# TM_CAP_UPSERT and TM_CAP_DELETE (it would store deletes as rows).
(cd "$data" && "$bin" validate cdc-no-capability.json) >"$work/cdc.out" 2>&1
rc=$?
cat "$work/cdc.out"
[ "$rc" -eq 2 ] || fail "cdc without TM_CAP_DELETE: exit $rc, expected 2"
grep -q '^cdc-no-capability.json: \$.mapping.format: plugin "example_file" (.*example_file.so) cannot apply change events: it needs TM_CAP_UPSERT and TM_CAP_DELETE; use format "plain" or another sink$' \
    "$work/cdc.out" || fail "cdc without TM_CAP_DELETE: no refusal line"

# A plugin without validate() that declares its settings (example_file):
# the host checks them against its table, as open would.
(cd "$data" && "$bin" validate example-bad-settings.json) >"$work/declared.out" 2>&1
rc=$?
cat "$work/declared.out"
[ "$rc" -eq 2 ] || fail "declared settings: exit $rc, expected 2"
grep -qx 'example-bad-settings.json: $.sink: plugin "example_file" refused the config (INVALID): $.sink.settings.path: expected a non-empty string of at most 800 bytes, found integer 5' \
    "$work/declared.out" || fail "declared settings: no refusal line"

# A missing file is an error naming it; usage errors exit 2.
"$bin" validate "$work/no-such.json" >"$work/missing.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "missing file: exit $rc, expected 2"
grep -q "^$work/no-such.json: \\$: cannot read the file: " "$work/missing.out" ||
    fail "missing file: $(cat "$work/missing.out")"
"$bin" validate >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "no CONFIG: exit $rc, expected 2"
"$bin" validate --bogus x.json >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "unknown option: exit $rc, expected 2"
"$bin" validate --help | grep -q '^usage: tidemark validate' ||
    fail "--help: no usage line"

[ "$failed" -eq 0 ] && echo "validate_cli: all passed"
exit "$failed"
