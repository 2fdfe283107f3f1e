#!/usr/bin/env bash
# Set up (if needed) and start Strata on the embedded defaults under ./data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The server refuses to run as root unless told to; a root shell (CI, containers) tells it, and says so.
as_root=()
if [ "$(id -u)" = 0 ]; then
    echo "serve.sh: running as root, so passing --allow-root" >&2
    as_root=(--allow-root)
fi
exec .venv/bin/strata serve --data-dir "${STRATA_DATA_DIR:-./data}" ${as_root[@]+"${as_root[@]}"} "$@"
