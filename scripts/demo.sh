#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run `npu-zc` on its embedded
# default. Extra arguments replace the default command, e.g. `scripts/demo.sh info`.
set -euo pipefail
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
"$REPO/scripts/setup.sh"
if [ $# -eq 0 ]; then
    set -- demo
fi
exec "${VENV:-$REPO/.venv}/bin/npu-zc" "$@"
