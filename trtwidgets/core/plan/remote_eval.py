"""The planner's questions as Dask tasks: the evaluator's state sent once per worker, each question a small task.

A question is what :meth:`~.plan_eval.Evaluator.score` is asked: a candidate's node set and ranges (a dict of
floats, a few kB), and whether it is scored on the ranking subset. The model, the held-back feeds, FP32's
reference on them and the bound target travel once, scattered to every worker (:meth:`Evaluator.state
<.plan_eval.Evaluator.state>`); a worker keeps an evaluator of them (its exports remembered) for the plan's
questions. The search itself stays here, on the client, and asks in its own order: where it knows the next
questions (every range method, every layer's cost alone, a layer's range alternatives) it sends them at once
(:meth:`~.plan_eval.Evaluator.prefetch`), so the workers answer side by side; the answers are the ones this
process would compute, so the decisions are the same. A task whose worker died is run again elsewhere by Dask;
a cancel cancels the questions in flight.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["RemoteScores", "answer"]

_EVALUATORS: Dict[Tuple[str, Any], Any] = {}  # a worker's evaluators: (state token, options) -> Evaluator


def answer(state, options, amax: Mapping[str, float], layers, rank: bool):
    """A worker's task: ``(accuracy, quantized layers)`` of one question, as :meth:`Evaluator.score` gives it."""
    from .plan_eval import Evaluator

    key = (state.token, options)
    ev = _EVALUATORS.get(key)
    if ev is None:
        if len(_EVALUATORS) >= 2:  # one plan's evaluator, and the one of its options after the FP32 island
            _EVALUATORS.pop(next(iter(_EVALUATORS)))
        ev = _EVALUATORS[key] = Evaluator.from_state(state, options)
    return ev.score(amax, layers, rank=rank)


class RemoteScores:
    """The questions of one evaluator, answered on the workers of ``client``.

    Parameters
    ----------
    client : distributed.Client
    ev : Evaluator
        Its :meth:`~.plan_eval.Evaluator.state` is scattered to every worker now.
    """

    def __init__(self, client, ev):
        self.client = client
        self.state = client.scatter(ev.state(), broadcast=True)
        self.pending: Dict[tuple, Any] = {}
        self.asked = 0

    def submit(self, asked: tuple, options, amax: Mapping[str, float], layers, rank: bool) -> None:
        """Send one question (once: a question already in flight is not sent again)."""
        if asked not in self.pending:
            self.pending[asked] = self.client.submit(answer, self.state, options, dict(amax), layers, rank,
                                                     pure=False)
            self.asked += 1

    def answer(self, asked: tuple, options, amax: Mapping[str, float], layers: Optional[frozenset], rank: bool):
        """The answer of a question, sent now unless it was already; a cancel cancels every question in flight."""
        from ..common.dask_cluster import results

        self.submit(asked, options, amax, layers, rank)
        try:
            return results([self.pending.pop(asked)])[0]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Cancel the questions in flight (none once the search ended normally) and let go of the state."""
        for fut in self.pending.values():
            fut.cancel()
        self.pending.clear()
        if self.state is not None:
            self.state.release()
            self.state = None
