"""What catching ONNX Runtime's log costs per run (issue 34, item 4).

Every ``OrtSession.run`` points file descriptor 2 at a capture file and back (:mod:`trtwidgets.core.common.ort_log`).
This times many runs of a one-node model (the worst case: the run itself costs almost nothing) and of the demo
classifier, with the catch and without it (the same session with its catch turned off), and prints both side by
side with the ratio.

    python benchmarks/ort_log_overhead.py
"""

from __future__ import annotations

import time

import numpy as np
import onnx
from onnx import TensorProto, helper

from trtwidgets import demo
from trtwidgets.core.common.ort import open_session


def _relu() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _per_run(model, feed, caught: bool, runs: int) -> float:
    sess = open_session(model)
    sess._log_caught = caught  # the one switch between the two sides: everything else is the same session
    for _ in range(10):
        sess.run(None, feed)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(runs):
            sess.run(None, feed)
        best = min(best, (time.perf_counter() - t0) / runs)
    return best


def main() -> None:
    cases = [("one Relu, 16 values", _relu(), {"x": np.ones(16, np.float32)}, 5000),
             ("demo classifier, batch 1", str(demo.MODEL_PATH), demo.sample_inputs(1)[0], 200)]
    print(f"{'model':<28} {'caught us/run':>14} {'terminal us/run':>16} {'ratio':>7}")
    for name, model, feed, runs in cases:
        caught = _per_run(model, feed, True, runs)
        plain = _per_run(model, feed, False, runs)
        print(f"{name:<28} {caught * 1e6:>14.1f} {plain * 1e6:>16.1f} {caught / plain:>7.2f}")


if __name__ == "__main__":
    main()
