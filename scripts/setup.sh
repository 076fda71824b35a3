#!/usr/bin/env bash
# Installs everything this project needs on a fresh Debian machine with Python >= 3.11.
#   scripts/setup.sh          the package and the Debian programs the core profile's cases need
#                             (faketime: conformance/environment.py is the one table), enough for
#                             `python3 -m conformance certify`
#   scripts/setup.sh --test   plus test tools, the programs of every profile and Debian's chromium
#                             (for e2e and the suite)
#                             and a real hermes-agent in its own venv (tests/real_hermes)
#   scripts/setup.sh --hermes only that hermes-agent venv
# The real Hermes lives in its own venv so that its pins never mix with ours:
#   HERMES_AGENT_VENV (default: .venv-hermes in the repo root). Installed once; a venv that
#   already holds hermes-agent==$HERMES_AGENT_VERSION is left alone. HERMES_AGENT_SKIP=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
HERMES_AGENT_VERSION=0.19.0

install_hermes_agent() {
  local venv=${HERMES_AGENT_VENV:-$PWD/.venv-hermes}
  if [ "${HERMES_AGENT_SKIP:-}" = 1 ]; then echo "hermes-agent: skipped (HERMES_AGENT_SKIP=1)"; return 0; fi
  if [ -x "$venv/bin/hermes" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("hermes-agent"))' 2>/dev/null)" = "$HERMES_AGENT_VERSION" ]; then
    return 0
  fi
  echo "hermes-agent: installing $HERMES_AGENT_VERSION into $venv (about a minute, 240 MB)"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "hermes-agent==$HERMES_AGENT_VERSION"
}
# The Debian packages missing for "$@" (python -m conformance environment's options), installed.
install_debian() {
  local need
  need=$("$PY" -m conformance environment --missing-packages "$@")
  if [ -n "$need" ]; then
    echo "installing Debian packages: $need"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
  fi
}
if [ "${1:-}" = "--hermes" ]; then
  install_hermes_agent
elif [ "${1:-}" = "--test" ]; then
  "$PY" -m pip install -q -e '.[test]'
  install_debian --profile all --with chromium
  install_hermes_agent
else
  "$PY" -m pip install -q -e .
  install_debian --profile core
fi
if [ "${1:-}" != "--hermes" ]; then
  # An editable install compiles nothing, and where PYTHONDONTWRITEBYTECODE is set every process
  # (each runner start-up, each xdist worker) would compile the repository's modules again.
  "$PY" -m compileall -q -j 0 fake_server runner_ref conformance fixtures negative_controls >/dev/null
fi
