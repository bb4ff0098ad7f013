#!/usr/bin/env bash
# Install the Debian packages tidemark needs to build, test and run its demo.
# Idempotent: every package is checked with `dpkg -s` first; when all are present
# no apt command runs at all. Runs non-interactively (CI, no stdin).
set -euo pipefail

PKGS=(build-essential cmake ninja-build pkg-config librdkafka-dev libpq-dev libjansson-dev
      libsqlite3-dev sqlite3 check libsubunit-dev kcat postgresql clang-format valgrind maven
      python3 python3-venv git
      libzstd-dev libsnappy-dev # Parquet page codecs: plugins/iceberg-lite
      man-db systemd # the package's tests: man --warnings, systemd-analyze, systemd-sysusers
      clang libclang-rt-dev # clang + its sanitizer/libFuzzer runtimes: tests/fuzz
      prometheus prometheus-node-exporter) # the metrics' judges: tests/e2e/metrics_e2e.c
# A JRE only when no java is on PATH (any Java 17+ will do for Kafka 4.x).
if ! command -v java >/dev/null 2>&1; then
  PKGS+=(openjdk-17-jre-headless)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg -s "$p" >/dev/null 2>&1 ||
     ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages already installed, nothing to do"
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
    echo "install-deps: missing packages: ${missing[*]}; run as root (or install sudo)" >&2
    exit 1
  fi
fi

echo "install-deps: installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q </dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "install-deps: installed: ${missing[*]}"
