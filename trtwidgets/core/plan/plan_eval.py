"""How the planner measures a candidate: export it, run it in ONNX Runtime, compare with FP32.

ONNX Runtime on the CPU predicts a TensorRT Q/DQ engine's accuracy well (on a real
mobile detector the two agreed at cosine 0.978), so the search runs here and the GPU
only confirms. Each evaluation is one export (:func:`..qdq.export.build_qdq`) and one
ORT run over the held-back samples, along each tensor's own batch axis
(:func:`~.plan_data.run_samples`), scored on every output's worst channel group
(:func:`~..accuracy.verdict.evaluate`, the one verdict).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from ..model.onnx_graph import WEIGHTED_OPS
from ..model.graph_patterns import node_label
from ..qdq.options import QdqOptions
from ..accuracy.target import Target
from ..accuracy.verdict import evaluate
from .plan_data import run_samples
from .plan_values import PlanAccuracy

__all__ = ["Evaluator", "EvaluatorState", "weighted_edges"]


@dataclass
class Evaluator:
    """Exports and scores candidates against the float model's outputs on held-back feeds.

    Attributes
    ----------
    proto : onnx.ModelProto
        The float model.
    feeds : list of dict
        Held-back samples, one feed each.
    reference : dict
        The float model's outputs on ``feeds``, batch first.
    options : QdqOptions
        How every candidate is exported (its ``high_precision`` resolved: BF16 is
        evaluated as FP32, ONNX Runtime has no BF16 kernels on the CPU); a candidate is
        the set of layers it runs in INT8 (a :class:`~trtwidgets.core.qdq.spec.QdqSpec`'s nodes).
    target : Target, optional
        The target bound to ``reference`` (its metric made, FP32's score recorded): every score is
        the one verdict's (:func:`~..accuracy.verdict.evaluate`).
    axes : BatchAxes, optional
        The batch axis of every input and output (default: axis 0 everywhere).
    batch : int
        Samples per ONNX Runtime run.
    runs : int
        How many ORT runs so far (for the progress line).
    downstream : bool
        Score a candidate by running only what its quantizers change, from one cached run of the float part
        (:mod:`.downstream`; the same outputs to the bit); False runs every candidate whole.
    """

    proto: onnx.ModelProto
    feeds: List[Dict[str, np.ndarray]]
    reference: Dict[str, np.ndarray]
    options: QdqOptions = field(default_factory=lambda: QdqOptions(high_precision="fp32"))
    target: Optional[Target] = None
    axes: Optional[Any] = None
    batch: int = 1
    runs: int = 0
    downstream: bool = True
    _labels: Dict[str, onnx.NodeProto] = field(default_factory=dict, repr=False)
    _rank: tuple = field(default=(), repr=False)
    _scores: Dict[tuple, Tuple[PlanAccuracy, Tuple[str, ...]]] = field(default_factory=dict, repr=False)
    _rank_is_all: bool = field(default=True, repr=False)
    _export_memo: dict = field(default_factory=dict, repr=False)  # see qdq.export.unchecked_exports
    _down: Optional[Tuple[QdqOptions, Any]] = field(default=None, repr=False, compare=False)
    #: The Dask workers that answer the questions (:class:`~.remote_eval.RemoteScores`), or None: this process.
    remote: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._labels = {node_label(n): n for n in self.proto.graph.node}
        self._rank = (self.feeds, self.reference, self.target)
        self._rank_is_all = True
        self._scores = {}  # a copy (dataclasses.replace) with another reference or metric scores anew
        self._export_memo = {}  # a copy may hold another model
        self.remote = None  # a copy answers its own questions until given workers of its own
        self._down = None  # a copy caches its own float part's run

    @property
    def metric(self) -> Optional[Callable]:
        """The target's task metric (made on :attr:`reference`), or None."""
        return self.target.metric if self.target is not None else None

    @property
    def metric_reference(self) -> Optional[float]:
        """FP32's own score by the metric, or None."""
        return self.target.metric_reference if self.target is not None and self.metric is not None else None

    def set_rank_data(self, feeds, reference, target: Optional[Target] = None) -> None:
        """The (smaller) held-back subset that ranking runs on, with the target bound to it."""
        self._rank = (list(feeds), dict(reference), target)
        # Every held-back sample, and a metric where the candidates have one: a ranking score is a candidate's
        # score (the range methods' score of the chosen method is INT8 everywhere's), so both share one memory.
        self._rank_is_all = (len(self._rank[0]) == len(self.feeds)
                             and all(a is b for a, b in zip(self._rank[0], self.feeds))
                             and (target is None or target.metric is None) == (self.metric is None)
                             and (target.metric_reference if target is not None else None) == self.metric_reference)
        self._scores.clear()  # scores on the former subset

    def node(self, label: str) -> Optional[onnx.NodeProto]:
        """The node with this label, or None."""
        return self._labels.get(label)

    def export(self, amax: Mapping[str, float], quantized: Optional[Iterable[str]] = None,
               high_precision: Optional[str] = None, choices: Optional[Mapping[str, str]] = None):
        """The Q/DQ export of a candidate: ``quantized`` layers in INT8 (None: every layer the rules allow), with
        its placement ``choices`` (a region scheme's, :mod:`~trtwidgets.core.qdq.region_choices`)."""
        from ..common.cancel import check
        from ..qdq.export import build_qdq, unchecked_exports
        from ..qdq.spec import QdqSpec

        opts = self.options.replace(high_precision=high_precision or self.eval_dtype)
        check()  # a unit of work: a cancel stops here (and inside ORT runs)
        # The planner checked the model once (planner._loaded); candidates are scored, not written.
        with unchecked_exports(self.proto, self._export_memo):
            return build_qdq(self.proto, QdqSpec(amax, opts, nodes=None if quantized is None else frozenset(quantized),
                                                 choices=choices or {}))

    @property
    def high_precision(self) -> str:
        """The float part's type the plan writes."""
        return self.options.resolved_high_precision()

    @property
    def eval_dtype(self) -> str:
        return "fp32" if self.high_precision == "bf16" else self.high_precision

    def score_model(self, model: onnx.ModelProto, rank: bool = False) -> PlanAccuracy:
        """Accuracy of ``model`` on all held-back feeds, or on the ranking subset (``rank``)."""
        feeds, reference, target = self._rank if rank else (self.feeds, self.reference, self.target)
        down = self._downstream()
        out = down.outputs(model, feeds, lambda: self.run(model, feeds)) if down is not None else None
        if out is None:
            out = self.run(model, feeds)
        self.runs += 1
        return evaluate(out, reference, target).scored

    def _downstream(self):
        """The :class:`~.downstream.DownstreamRuns` of the float part as the current options write it, or None."""
        if not self.downstream:
            return None
        if self._down is None or self._down[0] != self.options:
            from ..accuracy.reference import input_ranks
            from ..model.sample_batches import run_in_batches
            from .downstream import DownstreamRuns

            base = self.export({}, frozenset()).model
            axes, batch, ranks = self._axes(), self.batch, input_ranks(base)
            starts = [node_label(n) for n in base.graph.node if n.op_type in WEIGHTED_OPS]
            self._down = (self.options, DownstreamRuns(
                base, lambda run, feeds: run_in_batches(run, list(feeds), axes, batch, ranks), starts))
        return self._down[1]

    def run(self, model, feeds) -> Dict[str, np.ndarray]:
        """``model``'s outputs on ``feeds`` (samples), batch first."""
        return run_samples(model, feeds, self._axes(), self.batch)

    def score(self, amax: Mapping[str, float], quantized: Optional[Iterable[str]] = None, rank: bool = False,
              export=None) -> Tuple[PlanAccuracy, Tuple[str, ...]]:
        """Accuracy of the Q/DQ model with ``quantized`` layers in INT8 (None: every layer the rules allow),
        and the layers it quantized.

        Scores are remembered: the same request (layers, ranges) is not exported again, and an export
        that writes the same Q/DQ model as one scored before (the same layers, the same quantized
        tensors with the same amax: other tensors' ranges changed) is not run again. The search asks
        such questions again and again (a layer's cost alone, then its ranges tuned; "where it pays"
        over every layer the rules allow). ``export``: the export of exactly this request, when the
        caller made it already.
        """
        layers, rank, asked = self._asked(amax, quantized, rank)
        known = self._scores.get(asked)
        if known is not None:
            return known
        if self.remote is not None:  # a worker exports and runs it (export= is made there again)
            known = self._scores[asked] = self.remote.answer(asked, self.options, amax, layers, rank)
            self.runs += 1
            return known
        ex = export if export is not None else self.export(amax, layers)
        written = (rank, tuple(sorted((t.tensor, float(t.amax), tuple(t.consumers))
                                              for t in ex.report.activations)), ex.report.quantized_layers)
        known = self._scores.get(written)
        if known is None:
            known = self._scores[written] = (self.score_model(ex.model, rank), ex.report.quantized_layers)
        self._scores[asked] = known
        return known

    def _asked(self, amax: Mapping[str, float], quantized: Optional[Iterable[str]], rank: bool):
        """``(layers, rank, key)`` of a question: what :meth:`score` remembers it by."""
        layers = None if quantized is None else frozenset(quantized)
        rank = rank and not self._rank_is_all
        return layers, rank, (rank, layers, tuple(sorted((k, float(v)) for k, v in amax.items())))

    def prefetch(self, questions: Iterable[Tuple[Mapping[str, float], Optional[Iterable[str]], bool]]) -> None:
        """Send questions ``(amax, quantized, rank)`` that :meth:`score` is about to ask to the workers at once, so
        they are answered side by side; the search then asks them in its own order (no-op in this process)."""
        if self.remote is None:
            return
        for amax, quantized, rank in questions:
            layers, rank, asked = self._asked(amax, quantized, rank)
            if asked not in self._scores:
                self.remote.submit(asked, self.options, amax, layers, rank)

    def state(self) -> "EvaluatorState":
        """What a worker needs to answer this evaluator's questions (sent once per worker)."""
        import uuid

        feeds, reference, target = self._rank
        return EvaluatorState(uuid.uuid4().hex, self.proto, self.feeds, self.reference, self.target, self.axes,
                              self.batch, None if self._rank_is_all else (list(feeds), dict(reference), target))

    @classmethod
    def from_state(cls, state: "EvaluatorState", options: QdqOptions) -> "Evaluator":
        """The evaluator a worker answers with: the client's, with ``options`` (they change once, with the island)."""
        ev = cls(state.proto, state.feeds, state.reference, options, state.target, state.axes, state.batch)
        if state.rank is None:
            ev.set_rank_data(ev.feeds, ev.reference, ev.target)
        else:
            ev.set_rank_data(*state.rank)
        return ev

    def check_float_part(self, find_island: bool = True):
        """The all-FP16 model judged as TensorRT's FP16 kernels hold it, with its FP32 island when it fails
        (:func:`~..qdq.float_island.check_float_part`): what the FP16 engine is predicted to keep."""
        from ..accuracy.reference import Reference
        from ..qdq.float_island import FloatPartCheck, check_float_part

        ref = Reference(tuple(self.feeds), self.reference, self._axes(), batch=self.batch)
        try:
            return check_float_part(self.proto, ref, self.target, "fp16", self.options.keep_fp32, find_island)
        except (UserError, ValueError) as err:
            # A graph the converter cannot type, or FP16 values ORT cannot run: FP16 is still a candidate, scored as
            # FP32 (TensorRT has what the CPU lacks), and the plan says so.
            from ..accuracy.verdict import evaluate

            got = evaluate(ref.run(self.proto), ref, self.target)
            text = err.what if isinstance(err, UserError) else str(err)
            return FloatPartCheck("fp16", got, notes=(f"FP16 is scored as FP32: its float part could not be run in "
                                                      f"FP16 on the CPU ({text[:200]})",))

    def _axes(self):
        from ..model.batch_axis import BatchAxes

        if self.axes is not None:
            return self.axes
        return BatchAxes({n: 0 for n in self.feeds[0]}, {o.name: 0 for o in self.proto.graph.output})


@dataclass(frozen=True)
class EvaluatorState:
    """An :class:`Evaluator`'s model, held-back feeds, reference and target: scattered once to each Dask worker.

    ``rank`` is the ranking subset ``(feeds, reference, target)``, None when it is every held-back sample.
    """

    token: str
    proto: onnx.ModelProto
    feeds: List[Dict[str, np.ndarray]]
    reference: Dict[str, np.ndarray]
    target: Optional[Target]
    axes: Optional[Any]
    batch: int
    rank: Optional[tuple]


def weighted_edges(proto: onnx.ModelProto) -> List[Tuple[str, str]]:
    """``(upstream, downstream)`` pairs of weighted layers linked through non-weighted ops.

    Each weighted layer is linked to the nearest weighted layers upstream (through
    activations, pooling, adds, reshapes). Where the two ends of a pair differ in
    precision, TensorRT inserts a reformat (explicit engines: a layer of its own).
    """
    graph = proto.graph
    producer = {o: n for n in graph.node for o in n.output}
    edges: List[Tuple[str, str]] = []
    for node in graph.node:
        if node.op_type not in WEIGHTED_OPS:
            continue
        me = node_label(node)
        seen: Set[str] = set()
        todo = [node.input[0]] if node.input else []
        steps = 0
        while todo and steps < 200:
            steps += 1
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            prod = producer.get(t)
            if prod is None:
                continue
            if prod.op_type in WEIGHTED_OPS:
                edges.append((node_label(prod), me))
                continue
            todo.extend(i for i in prod.input if i and i in producer)
    return edges
