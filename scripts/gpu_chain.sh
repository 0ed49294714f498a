#!/bin/bash
# Runs detached on the GPU machine (DEVELOPERS.md, "The GPU machine"): the one-GPU Dask test, the YOLO same-graph
# run at level 3 (issue 44), the audio FP16 test (issue 42). What ran on 2026-12-08, kept as the pattern for the next.
# Start: (setsid nohup bash /tmp/repo/scripts/gpu_chain.sh >/dev/null 2>&1 </dev/null &); the YOLO files arrive
# in /tmp/yolo44 (carried in a call of their own, then "touch /tmp/yolo44/ready").
set -u
R=/tmp/repo; L=/tmp/chain
mkdir -p $L/art
source /tmp/trtb/env.sh
export PYTHONPATH=$TRTB/site:$R:/tmp/dask39 TRTWIDGETS_NO_CUBLAS_CUDNN=1
cd $R
log() { echo "== $* $(date +%T)" >> $L/log; }
log start; nvidia-smi -L >> $L/log 2>&1
log dask
TRTWIDGETS_ARTIFACTS=$L/art timeout 400 $PY39 -m pytest tests/gpu/test_measure.py -q -x -rs -k one_dask -p no:cacheprovider >> $L/log 2>&1
log "dask rc $?"
while [ ! -f /tmp/yolo44/ready ]; do sleep 2; done
$PY39 scripts/onnx_pack.py unpack /tmp/yolo44/pack /tmp/y44 >> $L/log 2>&1
log yolo
$PY39 scripts/gpu_peer_yolo.py --fp16 /tmp/y44/float_rw_b32.onnx \
  --qdq toolkit=/tmp/y44/toolkit_b32.onnx --qdq modelopt_rw=/tmp/y44/modelopt_rw_b32.onnx \
  --opt-levels 3 --build-budget 700 --check /tmp/yolo44/check_b32.npz --rounds 9 --runs 100 --cache-dir /tmp/peer_engines \
  --out $L/same_graph_b32_L3.json >> $L/log 2>&1
log "yolo rc $?"
log audio
TRTWIDGETS_ARTIFACTS=$L/art $PY39 -m pytest tests/gpu/test_audio_fp16.py -q -s -rs -p no:cacheprovider >> $L/log 2>&1
log "audio rc $?"
log CHAIN_DONE
