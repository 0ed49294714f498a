"""How long does switching the selected tensor take in the calibration explorer?

Target (issue 6): < 100 ms per switch with 500 tensors. The statistics are
synthetic (500 tensors, 2048-bin |x| histograms of Laplace bulks with outliers)
because the demo model has far fewer tensors. The switch goes through the same
path a click in the tensor list takes (``Select.value`` -> handler -> histogram
FigureWidget updated in place -> overview highlight), without a browser.

Run: ``python benchmarks/explorer_switch.py [--tensors 500] [--switches 200] [--grid]``
(``--grid`` also keeps the int8-grid tab open, so its figure is redrawn too).
The widgets' comms encode every message as a kernel would (JSON plus binary
buffers), so serialisation is inside the measurement; only the socket and the
browser's rendering are not.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

TARGET_MS = 100.0


def synthetic_stats(n_tensors: int, bins: int = 2048, values: int = 20_000, seed: int = 0):
    from trtwidgets.core.calibration.stats import ActivationStats, TensorStats

    rng = np.random.default_rng(seed)
    tensors = {}
    for i in range(n_tensors):
        x = rng.laplace(0.0, rng.uniform(0.1, 3.0), values)
        k = int(rng.integers(0, 30))
        x[:k] *= rng.uniform(5, 50)
        a = np.abs(x)
        hist_max = 2.0 ** (math.floor(math.log2(a.max())) + 1)
        hist = np.bincount(np.minimum((a * (bins / hist_max)).astype(np.int64), bins - 1), minlength=bins)
        tensors[f"block{i // 10:02d}/conv{i % 10}/output_{i}"] = TensorStats(
            name=f"block{i // 10:02d}/conv{i % 10}/output_{i}", count=values, nan_count=0, inf_count=0,
            min=float(x.min()), max=float(x.max()), hist=hist.astype(np.int64), hist_max=hist_max)
    return ActivationStats(tensors=tensors, samples=64, model_sha256="0" * 64, input_shapes={})


class _Wire:
    """Totals of what the widgets would send to the browser."""

    messages = 0
    bytes = 0


def _install_recording_comm() -> None:
    """Make every widget's comm serialise its messages as a kernel would (JSON + binary buffers).

    Without a kernel, ipywidgets uses a DummyComm that drops messages before they
    are encoded, which would leave the serialisation cost out of the measurement.
    """
    import json

    import comm
    from comm.base_comm import BaseComm

    class RecordingComm(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            _Wire.messages += 1
            _Wire.bytes += len(json.dumps(data, default=str).encode("utf-8"))
            _Wire.bytes += sum(memoryview(b).nbytes for b in (buffers or ()))

    comm.create_comm = RecordingComm


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tensors", type=int, default=500)
    p.add_argument("--switches", type=int, default=200)
    p.add_argument("--grid", action="store_true", help="keep the int8 grid tab open during switches")
    args = p.parse_args(argv)
    _install_recording_comm()

    from trtwidgets.core.calibration.ranges import METHODS, compute_ranges
    from trtwidgets.widgets.calib_explorer import CalibrationExplorer

    stats = synthetic_stats(args.tensors)
    t0 = time.perf_counter()
    ranges = compute_ranges(stats, METHODS)
    t_ranges = time.perf_counter() - t0
    t0 = time.perf_counter()
    ex = CalibrationExplorer(stats, ranges=ranges)
    t_build = time.perf_counter() - t0
    if args.grid:
        ex.figure_tabs.selected_index = 2

    names = list(ex.tensor_list.options)
    rng = np.random.default_rng(1)
    order = [names[i] for i in rng.integers(0, len(names), args.switches)]
    # warm-up: first plotly validation of each property is slower
    for name in order[:5]:
        ex.tensor_list.value = name
    times = []
    wire_before = (_Wire.messages, _Wire.bytes)
    for name in order:
        t0 = time.perf_counter()
        ex.tensor_list.value = name
        times.append((time.perf_counter() - t0) * 1e3)
        assert ex.tensor == name
        assert list(ex.hist_fig.data[0].y) is not None
    times = np.asarray(times)
    med, p95 = float(np.median(times)), float(np.percentile(times, 95))
    print(f"tensors {args.tensors}, bins 2048, switches {args.switches}, int8 grid tab {'open' if args.grid else 'closed'}")
    print(f"compute_ranges (all methods, once):  {t_ranges * 1e3:9.1f} ms")
    print(f"explorer construction:               {t_build * 1e3:9.1f} ms")
    print(f"{'switch tensor':<22}{'measured ms':>12}{'target ms':>11}{'ratio':>8}")
    for label, v in (("median", med), ("p95", p95), ("max", float(times.max()))):
        print(f"{label:<22}{v:12.1f}{TARGET_MS:11.0f}{v / TARGET_MS:8.2f}")
    msgs = (_Wire.messages - wire_before[0]) / len(order)
    kib = (_Wire.bytes - wire_before[1]) / len(order) / 1024
    print(f"sent to the browser per switch: {msgs:.1f} messages, {kib:.1f} KiB (JSON-encoded, as a kernel would)")
    print("PASS" if p95 < TARGET_MS else "ABOVE TARGET")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
