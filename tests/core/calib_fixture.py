"""The toolkit's statistics of the bundled demo data, committed as a fixture for the fidelity tests.

TensorRT's side (tests/gpu/test_calibration_fidelity.py) calibrates the same model on the same
32 bundled crops at 1x3x48x192, batch 1, and the GPU machine has no ONNX Runtime: so the
toolkit's side is collected here, on the CPU, and committed.  Regenerate with::

    python -m tests.core.calib_fixture
"""

from __future__ import annotations

from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "calib" / "cls_demo_stats.npz"
#: What TensorRT calibrates on in the GPU test: the bundled crops, one per batch.
SHAPE = (1, 3, 48, 192)


def collect():
    from trtwidgets import demo
    from trtwidgets.core.calibration.collect import collect_stats

    return collect_stats(demo.MODEL_PATH, demo.sample_inputs(1), progress=False)


def main() -> Path:
    from trtwidgets.core.calibration.stats import save_stats

    return save_stats(collect(), FIXTURE)


if __name__ == "__main__":  # pragma: no cover
    print(main())
