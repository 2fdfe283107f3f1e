#!/usr/bin/env bash
# Set up (if needed) and start Strata on the embedded defaults under ./data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/strata serve --data-dir "${STRATA_DATA_DIR:-./data}" "$@"
