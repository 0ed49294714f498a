"""Collect activation statistics with ONNX Runtime in one streaming pass.

Every floating-point tensor of the graph is made a graph output and the model is
run with graph optimisations off, so the names are the ONNX graph's (which are
TensorRT's tensor names) and no tensor is fused away.  Each batch's outputs are
folded into fixed-size per-tensor accumulators and dropped, so memory does not
grow with the number of samples.  Ctrl-C (or a Jupyter kernel interrupt) ends
collection early and returns what was seen, marked ``interrupted``; pass that
back as ``stats=`` with more data to continue.

Examples
--------
The whole toolkit calibration in a notebook, without widgets::

    from trtwidgets import demo
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.core.calibration.collect import collect_stats

    stats = collect_stats(demo.MODEL_PATH, "demo")          # or a folder, or a list of {"x": array}
    cal = Calibration.fit(stats, "entropy")
    cal.save("cls_cal.npz")                                  # statistics, method, the model's fingerprint
    cal.ranges                                               # tensor -> every range method's RangeResult
    write_cache(cal.amax, "cls.cache")                       # for TensorRT <= 10
"""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from .model_inputs import require_inputs
from .data import iter_labelled_feeds
from ..common.errors import CalibrationDataError, StatsError, UserError
from ..common.ort import OrtSession, open_session
from ..common.progress import ProgressArg, emit, split_progress
from .held_back import feed_fingerprints
from .sample_axes import SampleAxes
from .histogram import DEFAULT_BINS, HistogramAccumulator
from ..model.load import LoadedModel, as_loaded
from .stats import ActivationStats

_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def float_tensor_names(proto: onnx.ModelProto) -> Tuple[List[str], List[str]]:
    """Graph inputs and node outputs that are floating-point, in graph order.

    Returns
    -------
    (inputs, activations) : lists of str
        Activations exclude outputs of ``Constant`` nodes (weights, not activations) and
        tensors whose type shape inference could not determine.
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:
        inferred = proto
    g = inferred.graph
    types: Dict[str, int] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    inits = {i.name for i in g.initializer}
    inputs = [vi.name for vi in g.input if vi.name not in inits and types.get(vi.name) in _FLOAT_TYPES]
    acts: List[str] = []
    seen = set(inputs)
    for node in g.node:
        if node.op_type == "Constant":
            continue
        for out in node.output:
            if out and out not in seen and types.get(out) in _FLOAT_TYPES:
                acts.append(out)
                seen.add(out)
    return inputs, acts


def instrumented_model(proto: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """A copy of ``proto`` whose graph outputs include ``names``."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    existing = {o.name for o in model.graph.output}
    for name in names:
        if name not in existing:
            vi = model.graph.output.add()
            vi.name = name
    return model


def make_session(proto: onnx.ModelProto, providers: Optional[Sequence] = None, threads: Optional[int] = None
                 ) -> OrtSession:
    """An :class:`~trtwidgets.core.common.ort.OrtSession` with graph optimisations off (names must match the
    ONNX graph); a missing provider or a model ORT refuses is a UserError that says so."""
    return open_session(proto, providers=providers, threads=threads, optimization="disable",
                        purpose="collect calibration statistics")


@contextmanager
def _defer_interrupt():
    """Hold Ctrl-C while a batch is applied, so every tensor counts the same samples."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    old = signal.signal(signal.SIGINT, lambda *a: got.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if got:
            raise KeyboardInterrupt


#: The phase name of the statistics' progress (bar label and ProgressEvent phase).
PHASE = "calibration statistics"


class SampleProgress:
    """The statistics' progress: a tqdm bar and/or ProgressEvents of samples done (``progress=`` as ever).

    Parameters
    ----------
    progress : bool or callable
        See :func:`~..common.progress.split_progress`.
    total : int, optional
        Samples expected, when known.
    """

    def __init__(self, progress: ProgressArg, total: Optional[int]):
        bars, self.sink = split_progress(progress)
        self.bar, self.total, self.done = progress_bar(bars, total), total, 0
        emit(self.sink, "start", PHASE, total=total)

    def update(self, n: int, detail: str = "") -> None:
        """``n`` more samples counted."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        emit(self.sink, "step", PHASE, step=self.done, total=self.total, detail=detail)

    def close(self) -> None:
        """The phase is over (finished or cut short)."""
        if self.bar is not None:
            self.bar.close()
        emit(self.sink, "finish", PHASE, step=self.done, total=self.total)


def progress_bar(enabled: bool, total: Optional[int]):
    """A tqdm bar of samples (None when disabled, or without tqdm)."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # Python 3.9 GPU environment has no tqdm
        return None
    return tqdm(total=total, unit="sample", desc=PHASE, leave=True, dynamic_ncols=True)


def collect_stats(model: Union[str, LoadedModel], data, providers: Optional[Sequence] = None,
                  stats: Optional[ActivationStats] = None, progress: ProgressArg = True, num_bins: int = DEFAULT_BINS,
                  batch_size: Optional[int] = None, max_samples: Optional[int] = None, adapt=None, opt_shapes=None,
                  threads: Optional[int] = None, batch_axis=None) -> ActivationStats:
    """Run the model over calibration data and return per-tensor statistics.

    Parameters
    ----------
    model : str, path-like, onnx.ModelProto or LoadedModel
    data : CalibrationDataSpec, str, path-like or iterable of dict
        Anything :func:`~trtwidgets.core.calibration.data.iter_feeds` takes.
    providers : sequence, optional
        ONNX Runtime execution providers (default ``["CPUExecutionProvider"]``).
    stats : ActivationStats, optional
        Earlier statistics of the same model to continue from (e.g. after an interrupt).
    progress : bool or callable
        True: a tqdm bar with samples per second; a callable receives a
        :class:`~..common.progress.ProgressEvent` per batch (samples done of the total, where known).
    num_bins : int
        Histogram bins per tensor (a power of two).
    batch_size, max_samples, adapt, opt_shapes
        Passed to :func:`~.data.iter_feeds`.
    threads : int, optional
        ORT intra-op threads.
    batch_axis : str, int or mapping, optional
        Each input's batch axis, along which files are cut into samples and samples joined, as
        ``plan --batch-axis`` takes it (``1``, ``"none"``, ``"state:1,sr:none"``); default: found from the model.

    Returns
    -------
    ActivationStats
        ``interrupted`` is True when Ctrl-C stopped collection; it holds every batch completed.

    Raises
    ------
    CalibrationDataError
        For data that does not fit the model, or an empty source.
    StatsError
        When ``stats`` belong to another model or use another number of bins.
    """
    loaded = as_loaded(model)
    require_inputs(loaded)
    num_bins = checked_bins(num_bins, stats, loaded)
    axes = SampleAxes(loaded.summary, model=loaded, batch_axis=batch_axis)
    inputs, acts = float_tensor_names(loaded.proto)
    accs: Dict[str, HistogramAccumulator] = {
        name: (HistogramAccumulator.from_stats(stats.tensors[name]) if stats is not None and name in stats.tensors
               else HistogramAccumulator(name, num_bins)) for name in inputs + acts}
    session = make_session(instrumented_model(loaded.proto, acts), providers, threads)
    wanted = [n for n in session.output_names if n in accs]
    seen = Seen(stats.samples, stats.batches, dict(stats.input_shapes), list(stats.sample_hashes)) \
        if stats is not None else Seen()
    total = _known_total(data)
    if max_samples is not None:
        total = min(total, max_samples) if total is not None else max_samples
    bar = SampleProgress(progress, total)
    interrupted = False
    feeds = iter_labelled_feeds(data, loaded.summary, batch_size=batch_size, max_samples=max_samples, adapt=adapt,
                                opt_shapes=opt_shapes, axes=axes)
    pool = _histogram_pool(threads)
    try:
        for label, feed in feeds:
            n = collect_batch(session, wanted, inputs, accs, label, feed, seen, axes, pool)
            bar.update(n, str(label))
    except KeyboardInterrupt:
        interrupted = True
    except CalibrationDataError as err:
        # An empty source after a resume is not an error: the earlier samples still stand.
        if not (seen.samples and "empty" in err.what):
            raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    if seen.samples == 0 and interrupted:
        raise KeyboardInterrupt
    return stats_of(accs, seen, loaded, interrupted)


def stats_of(accs: Dict[str, HistogramAccumulator], seen: "Seen", loaded: LoadedModel,
             interrupted: bool = False) -> ActivationStats:
    """The statistics of what ``accs`` and ``seen`` counted (the accumulators are handed over, not copied)."""
    return ActivationStats(tensors={n: a.to_stats(copy=False) for n, a in accs.items()}, samples=seen.samples,
                           model_sha256=loaded.sha256, input_shapes=seen.shapes, interrupted=interrupted,
                           batches=seen.batches, sample_hashes=tuple(seen.hashes),
                           model_inputs={i.name: tuple(i.shape) for i in loaded.summary.inputs})


def checked_bins(num_bins, stats: Optional[ActivationStats], loaded: LoadedModel) -> int:
    """The bins to use: ``num_bins`` checked, or those of the statistics to continue from (checked to fit)."""
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 2 or num_bins & (num_bins - 1):
        raise StatsError(f"num_bins={num_bins!r} is not a power of two of at least 2.",
                         "Histograms double their range by merging bin pairs, which needs a power of two.",
                         f"Use e.g. num_bins={DEFAULT_BINS} (the default).")
    if stats is not None:
        if stats.model_sha256 and stats.model_sha256 != loaded.sha256:
            raise StatsError("The statistics to continue from are of another model.",
                             f"They were collected on model {stats.model_sha256[:12]}..., this is {loaded.sha256[:12]}....",
                             "Continue only with statistics of the same ONNX file, or start afresh (stats=None).")
        some = next(iter(stats.tensors.values()), None)
        if some is not None:
            num_bins = some.bins
    return num_bins


@dataclass
class Seen:
    """Samples, batches and input shapes (-1 where they varied) seen so far, and each sample's fingerprint."""

    samples: int = 0
    batches: int = 0
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    hashes: List[str] = field(default_factory=list)  # which samples: a plan warns when it measures on them


def _batch_updates(accs: Dict[str, HistogramAccumulator], pairs: List[Tuple[str, Any]],
                   pool: Optional[ThreadPoolExecutor]) -> List[Any]:
    """Each tensor's :meth:`~.histogram.HistogramAccumulator.batch_update`, in ``pairs``' order.

    With a pool, tensors are counted in parallel, the largest first: numpy releases the GIL in the
    counting (abs, scaling, casting, bincount), and the accumulators are only read until committed.
    On a 2-core machine this halves the histograms' wall time, which was as long as ONNX Runtime's run.
    """
    if pool is None or len(pairs) < 2:
        return [accs[n].batch_update(a) for n, a in pairs]
    order = sorted(range(len(pairs)), key=lambda i: -int(np.size(pairs[i][1])))
    futures = {i: pool.submit(accs[pairs[i][0]].batch_update, pairs[i][1]) for i in order}
    return [futures[i].result() for i in range(len(pairs))]


def _histogram_pool(threads: Optional[int]) -> Optional[ThreadPoolExecutor]:
    """Threads that count histograms: as many as ONNX Runtime's intra-op threads (None: one CPU only)."""
    from ..common.ort import bounded_threads, default_threads

    n = bounded_threads(int(threads), "threads=") if threads else default_threads()
    return ThreadPoolExecutor(max_workers=n, thread_name_prefix="trtw-histogram") if n > 1 else None


def collect_batch(session: OrtSession, wanted: List[str], inputs: List[str], accs: Dict[str, HistogramAccumulator],
                   label: str, feed: Dict, seen: Seen, axes: SampleAxes,
                   pool: Optional[ThreadPoolExecutor] = None) -> int:
    """Run one batch and fold it into ``accs`` and ``seen``; its sample count."""
    try:
        outs = session.run(wanted, feed)
    except UserError as exc:  # ORT's own failure, or a feed that cannot take the input's type
        raise CalibrationDataError(f"ONNX Runtime failed on calibration data {label}.",
                                   " ".join(p for p in (exc.what, exc.why) if p),
                                   "Check that sample against the model (shape, values); "
                                   "describe_adaptation says what the model is fed.") from None
    pairs = list(zip(wanted, outs)) + [(n, feed[n]) for n in inputs if n in feed]
    parts = [(accs[n], part) for (n, _), part in zip(pairs, _batch_updates(accs, pairs, pool))]
    del outs, pairs
    samples = axes.split(feed)
    # Each sample without its batch axis (axis 0 of an image batch, axis 1 of an LSTM state), the other inputs whole.
    hashes = [h for s in samples for h in feed_fingerprints(s, {k: axes.split_axes(s).get(k) for k in s})]
    with _defer_interrupt():
        for acc, part in parts:
            acc.commit(part)
        seen.samples += len(samples)
        seen.batches += 1
        seen.hashes.extend(hashes)
        for k, v in feed.items():
            shape = tuple(int(d) for d in v.shape)
            old = seen.shapes.get(k)
            seen.shapes[k] = shape if old is None or len(old) != len(shape) else \
                tuple(a if a == b else -1 for a, b in zip(old, shape))
    return len(samples)


def _known_total(data) -> Optional[int]:
    """Samples in a list of feeds, for the progress bar; None when that is not plain to see (the feed loop
    reports anything malformed, naming the sample)."""
    if not isinstance(data, (list, tuple)):
        return None
    try:
        return sum(int(next(iter(f.values())).shape[0]) for f in data if f)
    except Exception:
        return None


__all__ = ["Seen", "checked_bins", "collect_batch", "collect_stats", "float_tensor_names", "instrumented_model",
           "make_session", "progress_bar", "SampleProgress", "stats_of"]
