"""TensorRT's own INT8 calibrators, fed from the toolkit's calibration data.

TensorRT (<= 10) calibrates by asking for batches (``get_batch``) at the
calibration profile's *opt* shapes and running the network on them; the result
is a calibration cache, which TensorRT hands back through
``write_calibration_cache`` and which the calibrator of :func:`make_calibrator` writes into the
build directory. Batches come from any iterable of ``{input_name: array}``
(usually :func:`trtwidgets.core.calibration.data.iter_feeds`), are checked against
the opt shapes and copied into one :class:`~trtwidgets.trt.cuda.DeviceBuffer`
per input that is reused for every batch.

An exception inside ``get_batch`` cannot cross TensorRT's C++ frames, so it is
kept in the calibrator's ``error``, the batch stream is ended, and the build
re-raises it afterwards.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..core.common.atomic import write_bytes_atomic
from .probe import probe

#: Calibrator short names (as in ``TrtFeatures.calibrators``) -> TensorRT class names.
CALIBRATOR_CLASSES = {
    "entropy2": "IInt8EntropyCalibrator2",
    "minmax": "IInt8MinMaxCalibrator",
    "entropy": "IInt8EntropyCalibrator",
    "legacy": "IInt8LegacyCalibrator",
}


def pointer_list(names: Sequence[str], buffers: Mapping[str, Any]) -> List[int]:
    """The device addresses TensorRT's ``get_batch`` must return: plain ints, in the order of ``names``.

    Parameters
    ----------
    names : sequence of str
        The input names TensorRT passed to ``get_batch`` (its binding order, not the feed's).
    buffers : mapping
        Input name -> a device buffer (anything with an int ``ptr``) or an address.

    Raises
    ------
    KeyError
        TensorRT asked for an input that has no buffer.
    """
    out = []
    for name in names:
        buf = buffers[name]
        ptr = getattr(buf, "ptr", buf)
        if isinstance(ptr, (tuple, list)):
            raise TypeError(f"device address of {name!r} is {ptr!r}, not an int")
        out.append(int(ptr))
    return out


class CalibratorFields:
    """What a build reads of every calibrator it gave TensorRT (build_phases/write.py), before any batch:
    the feed calibrators count and record batches; the cache bridge's only counts ``get_batch`` calls."""

    get_batch_calls = 0
    batches_fed = 0
    batch_shapes: Sequence[Dict[str, Tuple[int, ...]]] = ()
    skipped: Sequence[str] = ()
    cache_in: Optional[bytes] = None
    cache_written: Optional[bytes] = None
    error: Optional[BaseException] = None


class LegacyCalibratorDefaults:
    """TensorRT's documented defaults for the methods only ``IInt8LegacyCalibrator`` calls.

    Mix in before the TensorRT base class; the other calibrator kinds never call these.
    """

    def get_quantile(self):
        """TensorRT's default quantile, 0.9999."""
        return 0.9999

    def get_regression_cutoff(self):
        """TensorRT's default regression cutoff, 1.0."""
        return 1.0

    def read_histogram_cache(self, *args):
        """No histogram cache: TensorRT computes the histograms."""
        return None

    def write_histogram_cache(self, *args):
        """The histogram cache is not kept."""
        return None


class _FeedCalibratorMixin(CalibratorFields, LegacyCalibratorDefaults):
    """The behaviour shared by all four TensorRT calibrator kinds (see :func:`make_calibrator`)."""

    _trt_base: Any = None  # set on the concrete class

    def __init__(self, feeds: Iterable[Mapping[str, np.ndarray]], input_specs: Mapping[str, Tuple[Tuple[int, ...], Any]],
                 cache_out: Optional[str] = None, cache_in: Optional[bytes] = None, max_batches: Optional[int] = None,
                 on_batch=None):
        self._trt_base.__init__(self)
        self._feeds = iter(feeds)
        self.input_specs = {k: (tuple(int(d) for d in shape), np.dtype(dt)) for k, (shape, dt) in input_specs.items()}
        self.cache_out = cache_out
        self.cache_in = cache_in
        self.max_batches = max_batches
        self.on_batch = on_batch
        self.get_batch_calls = 0
        self.batches_fed = 0
        self.batch_shapes: List[Dict[str, Tuple[int, ...]]] = []
        self.skipped: List[str] = []
        self.cache_written: Optional[bytes] = None
        self.cache_read = False
        self.error: Optional[BaseException] = None
        self._buffers: Dict[str, Any] = {}


    # -- TensorRT's interface --------------------------------------------------------------------

    def get_batch_size(self):
        # Explicit-batch networks carry the batch in the opt shape; TensorRT wants 1 here.
        return 1

    def get_batch(self, names, *args):
        self.get_batch_calls += 1
        if self.error is not None:
            return None
        try:
            return self._next_batch(list(names))
        except BaseException as exc:
            self.error = exc
            return None

    def read_calibration_cache(self, *args):
        if self.cache_in:
            self.cache_read = True
            return self.cache_in
        return None

    def write_calibration_cache(self, cache, *args):
        data = bytes(cache)
        self.cache_written = data
        if self.cache_out:
            write_bytes_atomic(self.cache_out, data)
        return None

    # -- ours ----------------------------------------------------------------------------------------

    def _next_batch(self, names: List[str]):
        from . import cuda

        if self.max_batches is not None and self.batches_fed >= self.max_batches:
            return None
        while True:
            try:
                feed = next(self._feeds)
            except StopIteration:
                return None
            arrays = self._check(feed, names)
            if arrays is not None:
                break
        for name in names:
            a = arrays[name]
            buf = self._buffers.get(name)
            if buf is None:
                buf = cuda.DeviceBuffer(a.nbytes)
                self._buffers[name] = buf
            buf.copy_from(a)
        ptrs = pointer_list(names, self._buffers)
        self.batches_fed += 1
        self.batch_shapes.append({k: tuple(v.shape) for k, v in arrays.items()})
        if self.on_batch is not None:
            self.on_batch(self.batches_fed)
        return ptrs

    def _check(self, feed: Mapping[str, np.ndarray], names: Sequence[str]) -> Optional[Dict[str, np.ndarray]]:
        from ..core.common.errors import CalibrationDataError

        out = {}
        for name in names:
            if name not in feed:
                raise CalibrationDataError(f"A calibration batch lacks input {name!r}.",
                                           f"TensorRT asked for {list(names)}; the batch has {sorted(feed)}.",
                                           "Give every network input in each calibration sample.")
            shape, dtype = self.input_specs.get(name, (None, None))
            a = np.ascontiguousarray(feed[name], dtype=dtype)
            if shape is not None and tuple(a.shape) != shape:
                if tuple(a.shape[1:]) == shape[1:] and a.shape[0] < shape[0]:
                    # The last, short batch of a data set: TensorRT reads exactly the opt shape's bytes.
                    self.skipped.append(f"{name}: short batch {tuple(a.shape)} skipped (opt shape {shape})")
                    return None
                raise CalibrationDataError(
                    f"Calibration batch for input {name!r} has shape {tuple(a.shape)}, but TensorRT calibrates at the "
                    f"calibration profile's opt shape {shape}.",
                    "TensorRT reads exactly one opt-shaped tensor per input and batch.",
                    "Set adapt (pad/truncate/resize) in the calibration data, or change the profile's opt shape.")
            out[name] = a
        return out

    def free(self) -> None:
        """Release the device buffers (after the build)."""
        for buf in self._buffers.values():
            buf.free()
        self._buffers.clear()


_CLASSES: Dict[Tuple[int, str], type] = {}


def calibrator_class(kind: str, trt_module):
    """The calibrator class for ``kind`` (``"entropy2"``, ``"minmax"``, ``"entropy"``, ``"legacy"``).

    Raises
    ------
    TensorRTUnavailable
        This TensorRT has no such calibrator (TensorRT 11 has none).
    """
    from ..core.common.errors import TensorRTUnavailable
    from . import version_of

    kind = kind[4:] if kind.startswith("trt_") else kind
    if kind not in CALIBRATOR_CLASSES:
        raise ValueError(f"unknown calibrator kind {kind!r}; one of {sorted(CALIBRATOR_CLASSES)}")
    base = probe(trt_module, CALIBRATOR_CLASSES[kind])
    if base is None:
        raise TensorRTUnavailable(
            f"TensorRT {version_of(trt_module)} has no {CALIBRATOR_CLASSES[kind]}.",
            "TensorRT's calibrators were deprecated in 10.1 and removed in 11.",
            "Use the toolkit's calibration and export a Q/DQ ONNX model, or build with TensorRT 8.6-10.x.")
    key = (id(trt_module), kind)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = type(f"Feed{CALIBRATOR_CLASSES[kind][1:]}", (_FeedCalibratorMixin, base),
                   {"_trt_base": base, "kind": kind,
                    "__doc__": f"tensorrt.{CALIBRATOR_CLASSES[kind]} fed from trtwidgets calibration data."})
        _CLASSES[key] = cls
    return cls


def make_calibrator(kind: str, feeds: Iterable[Mapping[str, np.ndarray]],
                    input_specs: Mapping[str, Tuple[Sequence[int], object]], trt_module=None,
                    cache_out: Optional[str] = None, cache_in: Optional[bytes] = None,
                    max_batches: Optional[int] = None, on_batch=None):
    """A TensorRT calibrator of ``kind`` that feeds ``feeds`` at fixed shapes.

    Parameters
    ----------
    kind : str
        ``"entropy2"``, ``"minmax"``, ``"entropy"`` or ``"legacy"`` (``"trt_"`` prefix allowed).
    feeds : iterable of dict
        ``{input_name: array}`` batches, e.g. from :func:`~trtwidgets.core.calibration.data.iter_feeds`
        with the calibration profile's opt shapes.
    input_specs : mapping
        Input name -> (opt shape, numpy dtype). Batches are checked against them.
    trt_module : module, optional
    cache_out : str, optional
        Where to write the cache TensorRT produces.
    cache_in : bytes, optional
        An existing cache: TensorRT then skips calibration (``get_batch`` is never called).
    max_batches : int, optional
        Stop after this many batches.
    on_batch : callable, optional
        Called with the number of batches fed so far.
    """
    if trt_module is None:
        from . import tensorrt

        trt_module = tensorrt()
    cls = calibrator_class(kind, trt_module)
    return cls(feeds, input_specs, cache_out=cache_out, cache_in=cache_in, max_batches=max_batches, on_batch=on_batch)
