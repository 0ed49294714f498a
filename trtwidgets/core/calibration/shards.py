"""Calibration statistics as a map-reduce on Dask: shards of batches collected on workers, merged in order.

The client reads the data (the same batches, in the same order, as :func:`~.collect.collect_stats`), cuts
them into shards of consecutive batches and sends each to a worker with the model (scattered once per
worker); each worker runs its own ONNX Runtime session and returns the shard's statistics; the client
merges them in the data's order. The result is the :class:`~.stats.ActivationStats` one process gives:
the same counts, min/max, histograms, and so the same amax for every tensor and method.

How the histogram grids agree across shards
-------------------------------------------
- The fine ``|x|`` histogram's grid is fixed by a rule, not by the data's order: ``num_bins`` bins over
  ``[0, 2**e)``, ``e`` the smallest with every value inside (:mod:`.histogram`). Two shards' grids differ by
  a power of two, and widening merges bin pairs exactly, so their sum is the one-pass histogram.
- TensorRT's entropy histogram starts at the *first batch's* ``max |x|`` (``R0``) and doubles while a batch
  exceeds it. So the first batch is collected alone first (a shard of one batch), and every later shard starts
  its grid at that batch's ``R0`` per tensor (its seed): every grid is ``R0 * 2**k`` and merges exactly. A
  tensor that was all zero in the first batch gets its ``R0`` from the first shard in which it is not; a shard
  that ran before that was known and saw the tensor non-zero is collected again with the seed (rare).
- One thing depends on the order across shards: a value exactly at the grid's end is kept in the last bin
  (TensorRT's rule), and a shard's grid can be narrower than one process's was at that batch (the earlier
  shards' maximum is not known to it). Shards record those values per grid (``edges``); the merge, which knows
  the maximum of everything before, moves them to the bin one process would have counted them in.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.progress import ProgressArg
from .histogram import DEFAULT_BINS, HistogramAccumulator
from .stats import TRT_BINS, ActivationStats, TensorStats, rebin_to, trt_grid_range

__all__ = ["ShardResult", "ShardMerger", "collect_shard", "collect_stats_distributed", "SHARD_BATCHES"]

#: Batches per shard after the first (one batch): a session's start is paid once per shard, a shard's
#: statistics (~80 kB a tensor) travel back once.
SHARD_BATCHES = 4


@dataclass(frozen=True)
class ShardResult:
    """One shard's statistics and what its merge needs.

    Attributes
    ----------
    stats : ActivationStats
    seeded : frozenset of str
        Tensors whose TensorRT grid started at a seed.
    bases : dict
        Tensor -> the TensorRT range this shard started itself (no seed: its first non-zero batch's ``max |x|``).
    edges : dict
        Tensor -> {TensorRT range: values counted at that range's end, in its last bin}.
    """

    stats: ActivationStats
    seeded: FrozenSet[str]
    bases: Dict[str, float]
    edges: Dict[str, Dict[float, int]]


_SESSION: Dict[str, Any] = {}  # a worker's session of the model its shards run (one model at a time)


def model_key(loaded) -> str:
    """What tells a model apart on a worker: its file's hash, or the hash of its bytes when it was built in memory
    (a worker outlives a plan, and two in-memory models must not share a session). Computed once, on the client."""
    return loaded.sha256 or hashlib.sha256(loaded.proto.SerializeToString()).hexdigest()


def _session(loaded, providers, key_of_model: Optional[str]):
    from .collect import float_tensor_names, instrumented_model, make_session

    key = (key_of_model or model_key(loaded), tuple(providers or ()))
    if _SESSION.get("key") != key:
        _SESSION.clear()
        inputs, acts = float_tensor_names(loaded.proto)
        session = make_session(instrumented_model(loaded.proto, acts), providers)
        _SESSION.update(key=key, session=session, inputs=inputs, acts=acts)
    return _SESSION["session"], _SESSION["inputs"], _SESSION["acts"]


def collect_shard(loaded, batches: Sequence[Tuple[str, Dict[str, np.ndarray]]], seeds: Mapping[str, float],
                  num_bins: int, axes, providers=None, key_of_model: Optional[str] = None) -> ShardResult:
    """A worker's task: the statistics of ``batches`` (``(label, feed)``, in order), TensorRT grids from ``seeds``."""
    from .collect import Seen, collect_batch, stats_of

    session, inputs, acts = _session(loaded, providers, key_of_model)
    accs: Dict[str, HistogramAccumulator] = {}
    for name in inputs + acts:
        accs[name] = HistogramAccumulator(name, num_bins)
        accs[name].seed_shard(seeds.get(name, 0.0))
    wanted = [n for n in session.output_names if n in accs]
    seen = Seen()
    for label, feed in batches:
        collect_batch(session, wanted, inputs, accs, label, feed, seen, axes)
    bases = {n: a.trt_base for n, a in accs.items() if a.trt_base > 0}
    edges = {n: dict(a.edges or {}) for n, a in accs.items() if a.edges}
    return ShardResult(stats_of(accs, seen, loaded), frozenset(n for n in seeds if n in accs), bases, edges)


def _moved_edges(hist: np.ndarray, trt_range: float, edges: Mapping[float, int], grid_before: float) -> np.ndarray:
    """``hist`` (at ``trt_range``) with each edge value counted where one process would have: at a grid
    ``grid_before`` or wider, a value at the end of a narrower grid ``r`` was not at the end, so it belongs in the
    bin that starts at ``r`` (one above the last bin of ``r``'s grid, after widening)."""
    out = hist
    for r, count in edges.items():
        if not (r < grid_before) or count <= 0:
            continue
        k = int(round(math.log2(trt_range / r)))
        src, dst = (TRT_BINS - 1) >> k, TRT_BINS >> k
        if 1 <= k and src != dst:
            out = out.copy() if out is hist else out
            out[src] -= count
            out[dst] += count
    return out


def _merge_tensor(before: Optional[TensorStats], t: TensorStats, seed: Optional[float],
                  edges: Mapping[float, int]) -> TensorStats:
    """``before`` (everything earlier) and the next shard's ``t``, TensorRT's histogram on the common grid."""
    if before is None or not before.count:
        if before is None:
            return t
        return dataclasses.replace(before.merge(t), trt_hist=t.trt_hist, trt_range=t.trt_range)
    merged = before.merge(t)  # counts, min/max, the fine histogram: exact
    if not t.count or before.trt_hist is None or t.trt_hist is None:  # (statistics older than TensorRT's grid)
        return merged
    ra = before.trt_range if before.trt_range > 0 else 0.0
    rb = t.trt_range if t.trt_range > 0 else 0.0
    new_range = max(ra, rb)
    ha = rebin_to(before.trt_hist, ra, new_range) if new_range else np.asarray(before.trt_hist)
    hb = rebin_to(t.trt_hist, rb, new_range) if new_range else np.asarray(t.trt_hist)
    if seed is not None and edges and before.absmax > 0:
        hb = _moved_edges(hb, new_range, edges, trt_grid_range(seed, before.absmax))
    return dataclasses.replace(merged, trt_hist=(ha.astype(np.int64) + hb.astype(np.int64)), trt_range=float(new_range))


class ShardMerger:
    """Shards merged in the data's order; the TensorRT grid seeds the next shards start from.

    Parameters
    ----------
    earlier : ActivationStats, optional
        Statistics to continue from (``stats=``): their grids seed every shard.
    """

    def __init__(self, earlier: Optional[ActivationStats] = None):
        self.merged = earlier
        self.seeds: Dict[str, float] = {n: float(t.trt_range) for n, t in (earlier.tensors.items() if earlier else ())
                                        if t.count and t.trt_range > 0}

    def stale(self, shard: ShardResult) -> Tuple[str, ...]:
        """Tensors ``shard`` counted non-zero on a grid of its own though their seed is known now: collect it again."""
        return tuple(n for n, t in shard.stats.tensors.items()
                     if n in self.seeds and n not in shard.seeded and t.count and t.absmax > 0)

    def accept(self, shard: ShardResult) -> None:
        """Merge the next shard in order (its :meth:`stale` tensors must be none)."""
        before = self.merged.tensors if self.merged is not None else {}
        tensors = {n: _merge_tensor(before.get(n), t, self.seeds.get(n), shard.edges.get(n, {}))
                   for n, t in shard.stats.tensors.items()}
        for name, base in shard.bases.items():
            self.seeds.setdefault(name, float(base))
        if self.merged is None:
            self.merged = dataclasses.replace(shard.stats, tensors=tensors)
            return
        whole = self.merged.merge(shard.stats)  # samples, batches, shapes, sample fingerprints in order
        self.merged = dataclasses.replace(whole, tensors=dict(whole.tensors, **tensors))


def collect_stats_distributed(model, data, client, providers: Optional[Sequence] = None,
                              stats: Optional[ActivationStats] = None, progress: ProgressArg = True,
                              num_bins: int = DEFAULT_BINS, batch_size: Optional[int] = None,
                              max_samples: Optional[int] = None, adapt=None, opt_shapes=None,
                              batch_axis=None, shard_batches: int = SHARD_BATCHES) -> ActivationStats:
    """:func:`~.collect.collect_stats` on the workers of ``client`` (a :class:`distributed.Client`).

    Takes the same arguments and returns the same statistics (see the module docstring); the model travels
    to each worker once, each batch once. Ctrl-C or a cancel returns the shards merged so far, in order,
    marked ``interrupted`` (the shards in flight are cancelled).
    """
    from ..common.errors import CalibrationDataError
    from ..model.load import as_loaded
    from .collect import checked_bins
    from .data import iter_labelled_feeds
    from .model_inputs import require_inputs
    from .sample_axes import SampleAxes

    from ..common.dask_cluster import check_versions

    loaded = as_loaded(model)
    require_inputs(loaded)
    num_bins = checked_bins(num_bins, stats, loaded)
    check_versions(client)  # a client= made by the caller: its workers must run this trtwidgets too
    axes = SampleAxes(loaded.summary, model=loaded, batch_axis=batch_axis)
    feeds = iter_labelled_feeds(data, loaded.summary, batch_size=batch_size, max_samples=max_samples, adapt=adapt,
                                opt_shapes=opt_shapes, axes=axes)
    run = _Run(client, client.scatter(loaded, broadcast=True), model_key(loaded), ShardMerger(stats), num_bins,
               providers, progress)
    try:
        run.feed(feeds, axes, max(1, int(shard_batches)))
    except KeyboardInterrupt:
        run.cancel()
        if run.merger.merged is None or run.merger.merged is stats:
            raise
        return dataclasses.replace(run.merger.merged, interrupted=True)
    except CalibrationDataError as err:
        run.cancel()
        if not (stats is not None and stats.samples and "empty" in err.what):
            raise
    finally:
        run.close()
    merged = run.merger.merged
    assert merged is not None  # an empty collection raised CalibrationDataError above
    return merged


class _Run:
    """The shards of one distributed collection: submitted as the data is read, merged in order."""

    def __init__(self, client, model_future, key_of_model: str, merger: ShardMerger, num_bins: int, providers,
                 progress: ProgressArg):
        from .collect import SampleProgress

        self.client, self.model, self.key_of_model, self.merger = client, model_future, key_of_model, merger
        self.num_bins, self.providers = num_bins, providers
        self.in_flight: Deque[Tuple[Any, Any]] = deque()  # (the shard's data on the cluster, its task)
        self.bar = SampleProgress(progress, None)
        self.axes: Any = None  # a copy of the first read's SampleAxes, without its model

    def submit(self, batches: Any) -> None:
        """Collect a shard on a worker: ``batches`` is a list of ``(label, feed)``, or the future of one sent before.

        The batches travel as data of their own, not inside the task (a task graph of megabytes is slow, and Dask
        warns of it); a shard sent again (stale) reuses them where they are.
        """
        data = self.client.scatter([batches], hash=False)[0] if isinstance(batches, list) else batches
        fut = self.client.submit(collect_shard, self.model, data, dict(self.merger.seeds), self.num_bins,
                                 self.axes, self.providers, self.key_of_model, pure=False)
        self.in_flight.append((data, fut))

    def feed(self, feeds, axes, shard_batches: int) -> None:
        """Read, submit and merge every shard: the first batch alone (its grid seeds the rest), then the others."""
        from ..common.dask_cluster import worker_count

        limit = 2 * max(1, worker_count(self.client))  # shards in flight: the data held here stays bounded
        first = True
        shard: List[Tuple[str, dict]] = []
        for label, feed in feeds:
            if self.axes is None:  # the axes are settled by the first read; the model stays here
                self.axes = copy.copy(axes)
                self.axes.model = None
            shard.append((label, feed))
            if first or len(shard) >= shard_batches:
                self.submit(shard)
                shard = []
                if first:
                    self.drain(0)  # the first batch's grid seeds every other shard
                    first = False
                self.drain(limit - 1)
        if shard:
            self.submit(shard)
        if first and not self.in_flight:
            return
        self.drain(0)

    def drain(self, keep: int) -> None:
        """Merge the oldest shards in order until at most ``keep`` are in flight (a stale one is sent again)."""
        from ..common.dask_cluster import results

        while len(self.in_flight) > keep:
            data, fut = self.in_flight[0]
            shard = results([fut])[0]
            if self.merger.stale(shard):
                self.in_flight.popleft()
                self.submit(data)  # with the seeds known now; behind the others, merged when its turn comes
                self.in_flight.rotate(1)
                continue
            self.in_flight.popleft()
            self.merger.accept(shard)
            self.bar.update(shard.stats.samples, "a shard merged")

    def cancel(self) -> None:
        for _, fut in self.in_flight:
            fut.cancel()
        self.in_flight.clear()

    def close(self) -> None:
        self.bar.close()
        self.model.release()
