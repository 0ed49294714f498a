#!/usr/bin/env bash
# Run the GPU tests and GPU benchmarks on the GPU machine (see ../shared/gpu/README.md).
# Expects the TensorRT 8.6 bundle unpacked at /tmp/trtb. Everything the runs write
# (inspector JSON, caches, timings; engines excluded) comes back as $OUT/art.tgz.
#   bash scripts/gpu_session.sh [pytest args...]
#   bash scripts/gpu_session.sh --script PATH [args...]
# GPU_LIMIT_S (default 540) stops the run itself early enough that the tarball is
# still written inside the device tool's 600 s limit.
set -uo pipefail
export EXTRA_PYTHONPATH=$PWD
# shellcheck disable=SC1091
source /tmp/trtb/env.sh
export TRTWIDGETS_ARTIFACTS=${OUT:-/tmp/out}/art TRTWIDGETS_NO_CUBLAS_CUDNN=1 PYTHONUNBUFFERED=1
mkdir -p "$TRTWIDGETS_ARTIFACTS"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
limit=${GPU_LIMIT_S:-540}
if [ "${1:-}" = "--script" ]; then shift; timeout "$limit" "$PY39" "$@"; rc=$?
else timeout "$limit" "$PY39" -m pytest -m gpu -p no:cacheprovider -q -rA "${@:-tests/gpu}" 2>&1 | tee "$TRTWIDGETS_ARTIFACTS/pytest.log"; rc=${PIPESTATUS[0]}
fi
tar czf "${OUT:-/tmp/out}/art.tgz" --exclude='*.engine' --exclude='*.plan' -C "$(dirname "$TRTWIDGETS_ARTIFACTS")" art
exit $rc
