#!/usr/bin/env bash
# Run the quantization planner (`trtwidgets plan`, issue 14) on every zoo model, on the CPU.
#
#   benchmarks/zoo_plan.sh [MODEL ...]          # default: resnet cls det rec minilm
#
# Needs the zoo of `python benchmarks/zoo.py prepare` under $TRTWIDGETS_ZOO (default /work/zoo).
# For each model and batch B in $ZOO_PLAN_BATCHES (default "1 32") it writes
# $TRTWIDGETS_ZOO/<model>/plan_b<B>/{model.qdq.onnx,plan.json,plan.html,plan.log}: the cost model
# depends on the batch, so the pick may too. benchmarks/zoo_gpu.py builds plan_b<B>/model.qdq.onnx
# as the variant plan_pick (falling back to <model>/plan/model.qdq.onnx). All of calib/ calibrates;
# heldback/ measures accuracy (against ONNX Runtime FP32). Target: cosine 0.99, and for the
# detector also the mask IoU at 0.3 within the planner's default drop. Exit 1 from the planner
# ("no candidate meets the target") is a result, not an error: the loop goes on.
set -u
ZOO=${TRTWIDGETS_ZOO:-/work/zoo}
PY=${PYTHON:-python3}
BATCHES=${ZOO_PLAN_BATCHES:-"1 32"}
TRT_VERSION=${ZOO_PLAN_TRT_VERSION:-8.6}
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(resnet cls det rec minilm)
status=0
for m in "${MODELS[@]}"; do
  d="$ZOO/$m"
  if [ ! -f "$d/float.onnx" ]; then
    echo "$m: $d/float.onnx is missing: run python benchmarks/zoo.py prepare --models $m" >&2
    status=2
    continue
  fi
  extra=()
  [ "$m" = det ] && extra=(--metric mask-iou:0.3)
  for b in $BATCHES; do
    out="$d/plan_b$b"
    mkdir -p "$out"
    echo "== $m batch $b -> $out"
    start=$(date +%s)
    "$PY" -m trtwidgets.cli plan "$d/float.onnx" --data "$d/calib" --held-back "$d/heldback" \
      --target-cosine 0.99 "${extra[@]}" --trt-version "$TRT_VERSION" --batch "$b" --out "$out" --no-progress \
      2>&1 | tee "$out/plan.log"
    rc=${PIPESTATUS[0]}
    echo "== $m batch $b: exit $rc in $(( $(date +%s) - start )) s" | tee -a "$out/plan.log"
    [ "$rc" -gt 1 ] && status=$rc
  done
done
exit $status
