"""What TensorRT's calibrators are handed, without a GPU.

On the H200, Entropy2 calibration failed with ``TypeError: int() argument must
be a string, a bytes-like object or a number, not 'tuple'``: the build passed
its ``{name: (shape, dtype)}`` input specs to ``iter_feeds`` as opt shapes.
These tests run the same path on the CPU: specs -> opt shapes -> real feeds,
and ``get_batch``'s device-address list (device buffers are the edge: a fake
one with an int ``ptr`` stands in for cudaMalloc).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu import models
from trtwidgets.core.common.errors import CalibrationDataError
from trtwidgets.core.calibration.data import iter_feeds
from trtwidgets.core.model.load import load_model
from trtwidgets.trt.build import feed_opt_shapes
from trtwidgets.trt.calibrators import pointer_list


def test_specs_become_int_lists_that_iter_feeds_takes(tmp_path):
    summary = load_model(models.save(models.conv_relu((1, 3, 16, "W")), tmp_path / "dyn.onnx")).summary
    specs = {"x": ((1, 3, 16, 24), np.dtype(np.float32))}
    opt = feed_opt_shapes(specs)
    assert opt == {"x": [1, 3, 16, 24]} and all(type(d) is int for d in opt["x"])
    feeds = list(iter_feeds(models.feeds((1, 3, 16, 24), 3, seed=3), summary, opt_shapes=opt))
    assert len(feeds) == 3 and all(f["x"].shape == (1, 3, 16, 24) for f in feeds)
    # The shape of the GPU failure: the pairs themselves are not shapes (refused up front since the
    # calibration-data checks of issue 16, where TensorRT's get_batch used to raise a TypeError).
    with pytest.raises(CalibrationDataError, match="not a list of dims"):
        list(iter_feeds(models.feeds((1, 3, 16, 24), 1), summary, opt_shapes=specs))


class _FakeDeviceBuffer:
    """Stands in for cuda.DeviceBuffer: records what was copied, has an int address."""

    def __init__(self, ptr: int):
        self.ptr = ptr
        self.copied = []

    def copy_from(self, array):
        self.copied.append(np.array(array))

    def free(self):
        pass


def test_pointer_list_follows_tensorrts_name_order():
    buffers = {"a": _FakeDeviceBuffer(0x7000), "b": _FakeDeviceBuffer(0x9000)}
    assert pointer_list(["b", "a"], buffers) == [0x9000, 0x7000]
    assert pointer_list(["a"], {"a": 0x1234}) == [0x1234]
    assert all(type(p) is int for p in pointer_list(["a", "b"], buffers))
    with pytest.raises(KeyError):
        pointer_list(["c"], buffers)
    with pytest.raises(TypeError, match="not an int"):
        pointer_list(["a"], {"a": (0x1, 0x2)})


def test_get_batch_returns_int_addresses_in_order_of_names():
    trt = pytest.importorskip("tensorrt")
    from trtwidgets.trt.calibrators import make_calibrator

    feeds = [{"x": np.full((1, 3, 4, 4), k, np.float32), "m": np.full((1, 2), -k, np.float32)} for k in range(3)]
    specs = {"x": ((1, 3, 4, 4), np.float32), "m": ((1, 2), np.float32)}
    cal = make_calibrator("entropy2", feeds, specs, trt)
    cal._buffers.update({"x": _FakeDeviceBuffer(0x1000), "m": _FakeDeviceBuffer(0x2000)})
    got = [cal.get_batch(["m", "x"]) for _ in range(4)]
    assert cal.error is None, cal.error
    assert got[:3] == [[0x2000, 0x1000]] * 3 and got[3] is None
    assert cal.batches_fed == 3 and cal.get_batch_calls == 4
    assert [float(a[0, 0, 0, 0]) for a in cal._buffers["x"].copied] == [0.0, 1.0, 2.0]
    assert cal.batch_shapes[0] == {"m": (1, 2), "x": (1, 3, 4, 4)}
