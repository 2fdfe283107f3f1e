#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then lint, type-check and test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-browser.sh
(cd renderer-stub && npm ci --no-audit --no-fund --loglevel=error)
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
