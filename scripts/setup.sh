#!/usr/bin/env bash
# Installs everything this project needs on a fresh Debian machine with Python >= 3.11.
#   scripts/setup.sh          the package (enough for the demo / certify)
#   scripts/setup.sh --test   plus test tools and Debian's chromium + faketime (for e2e and the suite)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = "--test" ]; then
  "$PY" -m pip install -q -e '.[test]'
  need=""
  [ -x /usr/bin/chromium ] || need="$need chromium"
  command -v faketime >/dev/null 2>&1 || need="$need faketime"
  if [ -n "$need" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
  fi
else
  "$PY" -m pip install -q -e .
fi
