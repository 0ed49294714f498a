"""An engine's outputs on the plan's held-back samples, batch first, for judging it as the plan judges.

A measured engine is built at fixed shapes (the plan's batch). The samples go through
it that many at a time along each input's own batch axis
(:func:`~trtwidgets.core.model.sample_batches.run_in_batches`, the one sample batcher); the last run is padded by
repeating its last sample, and the padding is cut from the outputs. A model without a
batch axis runs sample by sample. What the outputs are worth is decided in core
(:class:`~trtwidgets.core.plan.engine_check.EngineCheck`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np

from ..core.model.batch_axis import BatchAxes
from ..core.model.sample_batches import run_in_batches
from ..core.plan.plan_values import EngineVerdict

__all__ = ["engine_outputs", "engine_verdict"]


def _pad(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    n = a.shape[axis]
    if n >= size:
        return a
    last = np.take(a, [n - 1], axis=axis)
    return np.concatenate([a] + [last] * (size - n), axis=axis)


def engine_outputs(engine, feeds: Sequence[Mapping[str, np.ndarray]], axes: BatchAxes) -> Dict[str, np.ndarray]:
    """Every sample of ``feeds`` through the engine (a path or build folder), outputs batch first.

    Raises
    ------
    UserError
        A sample the engine's shapes cannot take (another shape than the plan's), or TensorRT's own refusal.
    """
    from .runner import EngineRunner

    with EngineRunner(engine) as runner:
        shapes = runner.opt_shapes()
        ranks = {name: len(shape) for name, shape in shapes.items()}
        batch = 1
        if axes.batched:
            sizes = {int(shapes[n][a]) for n, a in axes.inputs.items() if a is not None and n in shapes}
            batch = max(sizes) if sizes else 1

        def run(feed: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
            n = 1
            padded = {}
            for name, a in feed.items():
                a = np.asarray(a)
                axis = axes.inputs.get(name)
                if axis is not None and name in shapes and a.ndim == len(shapes[name]):
                    n = a.shape[axis]
                    a = _pad(a, axis, int(shapes[name][axis]))
                padded[name] = a
            out = runner.infer(padded)
            cut = {}
            for name, v in out.items():
                axis = axes.outputs.get(name)
                v = np.array(v)
                cut[name] = np.take(v, range(n), axis=axis) if axis is not None and v.shape[axis] > n else v
            return cut

        return run_in_batches(run, list(feeds), axes, batch_size=batch, ranks=ranks)


def engine_verdict(engine, check) -> EngineVerdict:
    """The engine judged by the plan's check (:meth:`EngineCheck.verdict`); one with an ``error`` when it cannot run.

    A failure to run is a result, not an exception: the engine is then timed but not judged.
    """
    try:
        outputs = engine_outputs(engine, check.feeds, check.axes)
        return check.verdict(outputs)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        msg = getattr(exc, "what", None) or str(exc)
        return EngineVerdict(None, error=f"{type(exc).__name__}: {msg}"[:1000])
