"""When an export fails its check on held-back data: which tensors to change, and how.

Each quantized activation is measured alone, cheaply: the float model runs once on a few
held-back samples with the quantized tensors exposed, then each node that reads one quantized
is run alone (a one-node model in ONNX Runtime) on those float inputs with only that tensor
quantized, and its output is compared with the float one. The ratio of the error's energy to the
output's (dB, higher is worse) is the tensor's own cost, with its exported range and with every
other method's. What the advice says:

* **another method** where one costs at least :data:`BETTER_DB` less than the exported range
  (an amax override: ``--amax TENSOR=AMAX`` on the command line, ``cal.with_override`` in Python);
* **keep float** (its readers in high precision: ``--exclude``) for the costliest tensors, as many
  as the check needs: the changes are applied and the export checked again, keeping 1, 2, 4 ...
  tensors float until it passes (:data:`MAX_TRIES` checks at most). Range changes that make the check
  worse than the export itself (each better alone, worse together) are dropped.

So a failure names the culprits and what was verified to fix them, like the planner's per-tensor
ranges and layer costs, at the price of a few checks rather than a plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..model.graph_patterns import ConstIndex, node_label
from .options import QdqOptions

__all__ = ["BETTER_DB", "MAX_TRIES", "ExportAdvice", "TensorAdvice", "advise_export", "local_tensor_errors"]

#: Another method is advised where its error at the readers is at least this much lower (dB).
BETTER_DB = 3.0
#: Checks the advice runs at most to find how many tensors to keep float (1, 2, 4 ... 64, then all of them).
MAX_TRIES = 8
#: Held-back samples the local measure runs on.
LOCAL_SAMPLES = 4


@dataclass(frozen=True)
class TensorAdvice:
    """One quantized tensor: its own error at its readers, and what to do with it.

    Attributes
    ----------
    tensor : str
    readers : tuple of str
        The nodes reading it quantized (what ``--exclude`` names to keep it float).
    error_db : float
        Its error alone at its readers with the exported range (error energy / output energy, dB).
    source : str
        Where the exported range came from (a method, ``"override"`` or ``"given"``).
    amax : float
        The exported range.
    better : str
        A method whose range costs at least :data:`BETTER_DB` less ('' when none), with ...
    better_amax, better_db : float
        ... its amax and error.
    keep_float : bool
        Keeping it float was needed for the check to pass (or is the next thing to try).
    """

    tensor: str
    readers: Tuple[str, ...]
    error_db: float
    source: str
    amax: float
    better: str = ""
    better_amax: float = math.nan
    better_db: float = math.nan
    keep_float: bool = False

    def action(self) -> str:
        if self.keep_float:
            return "keep float (its readers in high precision)"
        if self.better:
            return f"use {self.better}'s range, amax {self.better_amax:.6g} ({self.better_db:.1f} dB)"
        return "keep as it is"


@dataclass(frozen=True)
class ExportAdvice:
    """What to change for an export to pass its check, worst tensor first, and whether that was verified.

    Attributes
    ----------
    tensors : tuple of TensorAdvice
        Every quantized tensor measured, worst first.
    samples : int
        Held-back samples the local measure ran on.
    passes : bool or None
        Whether the export with the advised changes passed the same check (None: not checked).
    result : str
        That check's outcome in words.
    """

    tensors: Tuple[TensorAdvice, ...]
    samples: int
    passes: Optional[bool] = None
    result: str = ""
    overrides: Mapping[str, float] = field(default_factory=dict)
    exclude: Tuple[str, ...] = ()
    keep_fp32: Tuple[str, ...] = ()
    float_part: str = ""

    def summary(self, max_lines: int = 12, cli: bool = True) -> str:
        """The advice in words: the culprits, what to do, and the verified outcome (options in CLI terms)."""
        changed = [t for t in self.tensors if t.better and not t.keep_float] + [t for t in self.tensors if t.keep_float]
        shown = changed or list(self.tensors[:3])
        lines = [self.float_part] if self.float_part else []
        if self.keep_fp32:
            keep = " ".join(_quoted(x) for x in self.keep_fp32)
            lines.append(f"  add: --keep-fp32 {keep}" if cli else
                         f"  options.keep_fp32 += {list(self.keep_fp32)!r}"[:600])
        if not self.tensors:
            if self.result:
                lines.append(self.result)
            return "\n".join(lines) or "No quantized tensor to change: the export quantizes nothing."
        lines.append(f"What to change (each quantized tensor's own error at its readers on {self.samples} held-back "
                     f"sample{'s' if self.samples != 1 else ''}, worst first):")
        for t in shown[:max_lines]:
            lines.append(f"  {t.tensor}: {t.error_db:.1f} dB with {t.source} (amax {t.amax:.6g}) -> {t.action()}")
        if len(shown) > max_lines:
            lines.append(f"  ... {len(shown) - max_lines} more")
        if self.result:
            lines.append(("With these changes " if changed else "") + self.result)
        if changed and cli:
            opts = []
            if self.exclude:
                opts.append("--exclude " + " ".join(_quoted(x) for x in self.exclude))
            if self.overrides:
                opts.append("--amax " + " ".join(_quoted(f"{k}={v:.6g}") for k, v in self.overrides.items()))
            lines.append("  add: " + " ".join(opts))
        elif changed:
            lines.append(f"  options.exclude += {list(self.exclude)!r}; cal.with_override for "
                         f"{len(self.overrides)} tensor(s): {dict(self.overrides)!r}"[:600])
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"samples": self.samples, "passes": self.passes, "result": self.result,
                "exclude": list(self.exclude), "overrides": dict(self.overrides), "keep_fp32": list(self.keep_fp32),
                "float_part": self.float_part,
                "tensors": [{"tensor": t.tensor, "readers": list(t.readers), "error_db": _num(t.error_db),
                             "source": t.source, "amax": t.amax, "better": t.better,
                             "better_amax": _num(t.better_amax), "better_db": _num(t.better_db),
                             "keep_float": t.keep_float} for t in self.tensors]}


def _num(v: float):
    return None if not math.isfinite(v) else v


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


# -- the local measure ------------------------------------------------------------------------------------------


def _fake_quant(x: np.ndarray, amax: float) -> np.ndarray:
    from ..calibration.fake_quant import fake_quant_symmetric

    return np.asarray(fake_quant_symmetric(x, amax), dtype=x.dtype)


def _node_model(proto: onnx.ModelProto, index: ConstIndex, node: onnx.NodeProto,
                values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """``node`` alone: its activations as inputs, its constants folded in from ``values`` or the graph."""
    inputs, inits, seen = [], [], set()
    for name in node.input:
        if not name or name in seen:
            continue
        seen.add(name)
        if name in values:
            a = values[name]
            inputs.append(onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        else:
            const = index.constant(name)
            if const is None:
                raise KeyError(name)
            inits.append(onnx.numpy_helper.from_array(const, name))
    outputs = [onnx.ValueInfoProto(name=o) for o in node.output[:1]]
    graph = onnx.helper.make_graph([node], "one_node", inputs, outputs, inits)
    m = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
    m.ir_version = proto.ir_version
    return m


def _error_db(y: np.ndarray, ref: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64)
    err = float(np.sum((np.asarray(y, np.float64) - ref) ** 2))
    power = float(np.sum(ref ** 2))
    if err == 0:
        return -math.inf
    return 10.0 * math.log10(err / power) if power > 0 else math.inf


def local_tensor_errors(model, candidates: Mapping[str, Mapping[str, float]], readers: Mapping[str, Sequence[str]],
                        feeds: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, Dict[str, float]]:
    """Tensor -> candidate -> its error alone at its readers (dB; the worst reader's).

    Parameters
    ----------
    model : LoadedModel, proto or path
        The float model.
    candidates : mapping
        Tensor -> name -> amax to try (e.g. ``{"exported": 3.2, "max": 4.1}``).
    readers : mapping
        Tensor -> labels of the nodes that read it quantized.
    feeds : sequence of dict
        Held-back samples (a few are enough).
    """
    from ..accuracy.intermediates import with_intermediate_outputs
    from ..common.ort import open_session
    from ..model.load import as_model_proto

    proto = as_model_proto(model)
    index = ConstIndex(proto.graph)
    by_label = {node_label(n): n for n in proto.graph.node}
    nodes = {t: [by_label[r] for r in rs if r in by_label] for t, rs in readers.items() if t in candidates}
    needed = sorted({i for ns in nodes.values() for n in ns for i in list(n.input) + list(n.output[:1])
                     if i and not index.is_constant(i) and i in index.producer})
    graph_inputs = {i.name for i in proto.graph.input}
    sess = open_session(with_intermediate_outputs(proto, needed), optimization="disable",
                        purpose="expose the quantized tensors")
    names = sess.output_names
    runs = [dict(zip(names, sess.run(names, dict(f)))) for f in feeds]
    for run, f in zip(runs, feeds):
        run.update({k: np.asarray(v) for k, v in f.items() if k in graph_inputs})
    out: Dict[str, Dict[str, float]] = {}
    for tensor, ns in nodes.items():
        per: Dict[str, float] = {}
        for node in ns:
            try:
                one = open_session(_node_model(proto, index, node, runs[0]), optimization="disable", log_severity=4,
                                   purpose="run one node alone")
            except Exception:
                continue
            for name, amax in candidates[tensor].items():
                errs = []
                for run in runs:
                    feed = {i: run[i] for i in dict.fromkeys(node.input) if i in run}
                    feed[tensor] = _fake_quant(run[tensor], amax)
                    errs.append((one.run(None, feed)[0], run[node.output[0]]))
                db = _error_db(np.concatenate([np.ravel(a) for a, _ in errs]),
                               np.concatenate([np.ravel(b) for _, b in errs]))
                per[name] = max(per.get(name, -math.inf), db)
        if per:
            out[tensor] = per
    return out


# -- the advice --------------------------------------------------------------------------------------------------


def _exclusion_of(node: onnx.NodeProto) -> str:
    """How ``--exclude`` names a node: its name, else its first output (what an unnamed node is known by)."""
    return node.name or (node.output[0] if node.output else node_label(node))


def advise_export(model, export, calibration, feeds: Sequence[Mapping[str, np.ndarray]],
                  check: Callable[[Any], Tuple[bool, str, float]], build: Callable[[Any, Any], Any],
                  options: Optional[QdqOptions] = None, progress: Optional[Callable[[str], None]] = None,
                  float_check: Optional[Callable[..., Any]] = None) -> ExportAdvice:
    """Name the tensors that make ``export`` fail ``check``, say what to do, and verify it.

    Parameters
    ----------
    model : LoadedModel
        The float model.
    export : QdqExport
        The export that failed.
    calibration : Calibration or mapping
        Where its amax came from: a Calibration offers every method's range per tensor; a mapping
        (a cache's amax) only the exported one (then only "keep float" is advised).
    feeds : sequence of dict
        The held-back samples of the check.
    check : callable
        ``check(QdqExport) -> (passed, outcome in words, margin)``: the same check the export failed (the margin:
        how far the gated measure lies above its threshold).
    build : callable
        ``build(model, QdqSpec) -> QdqExport`` (:func:`~.export.build_qdq`), for the variants it checks.
    options : QdqOptions, optional
        The export's options.
    progress : callable, optional
        Hears a line per step.
    float_check : callable, optional
        ``float_check(dtype, keep_fp32) -> FloatPartCheck`` (:meth:`~.held_back_check.HeldBackCheck.float_part`):
        with an FP16/BF16 float part, the float part alone is judged first; when it misses the target, the float
        part, not the ranges, is what fails, and its FP32 island is advised (and verified) before any range.
    """
    from ..calibration.ranges import METHODS
    from .spec import QdqSpec

    say = progress or (lambda text: None)
    opts = options if options is not None else QdqOptions()
    hp = opts.resolved_high_precision()
    island: Tuple[str, ...] = ()
    float_words = ""
    if float_check is not None and hp in ("fp16", "bf16"):
        say(f"judging the float part alone in {hp.upper()}")
        fp = float_check(hp, opts.keep_fp32)
        if not fp.meets:
            island, float_words = _float_part_words(fp, hp)
            if island:
                opts = opts.replace(keep_fp32=tuple(opts.keep_fp32) + island)
                again = build(model, QdqSpec(dict(_amax_of(calibration)), opts, source=export.report.ranges))
                passed, outcome, _ = check(again)
                say(f"check with the float part's island kept FP32: {outcome}")
                if passed:
                    return ExportAdvice((), 0, True, f"the check passes with it: {outcome}", keep_fp32=island,
                                        float_part=float_words)
                export = again  # the ranges are judged on the float part that holds
    acts = {a.tensor: a for a in export.report.activations}
    if not acts:  # nothing quantized: no range to change; the float part is all there is to judge
        return ExportAdvice((), 0, False if float_words else None, "" if float_words else
                            "No tensor is quantized, so no range can be changed: the export is the float part alone.",
                            keep_fp32=island, float_part=float_words)
    sources, ranges = _sources_of(calibration, model)
    candidates = {}
    for t, a in acts.items():
        cand = {"exported": a.amax}
        for m in METHODS:
            r = ranges.get(t, {}).get(m)
            if r is not None and math.isfinite(r.amax) and r.amax > 0 and abs(r.amax - a.amax) > 1e-6 * a.amax:
                cand[m] = r.amax
        candidates[t] = cand
    few = list(feeds)[:LOCAL_SAMPLES]
    say(f"measuring each of {len(acts)} quantized tensors alone at its readers on {len(few)} held-back samples")
    errors = local_tensor_errors(model, candidates, {t: a.consumers for t, a in acts.items()}, few)
    advice = _ranked(acts, errors, candidates, sources)
    overrides = {t.tensor: t.better_amax for t in advice if t.better}
    amax = dict(_amax_of(calibration))
    amax.update(overrides)
    by_label = {node_label(n): n for n in model.proto.graph.node}

    def trial(keep: Sequence[TensorAdvice]):
        excl = tuple(dict.fromkeys(_exclusion_of(by_label[r]) for t in keep for r in t.readers if r in by_label))
        spec = QdqSpec(amax, opts.replace(exclude=tuple(opts.exclude) + excl), source=export.report.ranges)
        built = build(model, spec)
        if not built.report.quantized_layers:
            # Everything float passes any check and is no Q/DQ model: FP16 is the answer then, not this export.
            return (False, "no layer left in INT8 (FP16 without INT8 is what meets this check)", -math.inf), excl
        return check(built), excl

    passed, outcome, excl = False, "", ()
    if overrides:
        (passed, outcome, gained), excl = trial(())
        say(f"check with {len(overrides)} range change(s): {outcome}")
        if not passed and gained < check(export)[2]:
            # Better alone at their readers, worse for the model: the ranges stay as exported.
            say("the range changes lowered the check: the ranges stay as exported")
            advice = [TensorAdvice(**{**t.__dict__, "better": "", "better_amax": math.nan, "better_db": math.nan})
                      for t in advice]
            amax.update({t: v for t, v in _amax_of(calibration).items() if t in overrides})
            overrides = {}
    order = sorted(advice, key=lambda t: -_after(t))
    keep: List[TensorAdvice] = []
    k, tries = 1, 0
    while not passed and tries < MAX_TRIES and k <= len(order):
        keep = order[:k]
        (passed, outcome, _), excl = trial(keep)
        say(f"check with {k} tensor(s) kept float: {outcome}")
        tries += 1
        k = min(k * 2, len(order)) if k < len(order) else k + 1
    kept = {t.tensor for t in keep}
    final = tuple(TensorAdvice(**{**t.__dict__, "keep_float": t.tensor in kept}) for t in advice)
    verdict = f"the check {'passes' if passed else 'still fails'}: {outcome}" + (
        "" if passed else "; keep more tensors float (the worst above) or plan the model "
                          "(trtwidgets plan), which searches per layer")
    return ExportAdvice(final, len(few), passed, verdict,
                        {t: v for t, v in overrides.items() if t not in kept}, excl, island, float_words)


def _float_part_words(fp, hp: str) -> Tuple[Tuple[str, ...], str]:
    """``(the island to keep FP32, the advice's first line)`` of a float part that misses the target alone."""
    why = "; ".join(fp.verdict.why) or "it misses the target"
    head = f"The float part, not the ranges, is what fails: in {hp.upper()} alone (no INT8 layer) {why}."
    if fp.fixed:
        return fp.island, (f"{head} Keeping {len(fp.island)} nodes FP32 makes it meet the target: "
                           f"{fp.describe(6)}.")
    return (), (f"{head} No island of FP32 nodes fixes it: export with --high-precision fp32 (the float part in "
                "FP32; TensorRT 8.x and weakly typed 10 still lower it with the FP16 flag).")


def _after(t: TensorAdvice) -> float:
    """A tensor's error once its advised method is applied."""
    return t.better_db if t.better else t.error_db


def _ranked(acts, errors, candidates, sources) -> List[TensorAdvice]:
    out = []
    for tensor, a in acts.items():
        per = errors.get(tensor)
        if not per or "exported" not in per:
            continue
        cur = per["exported"]
        alts = {m: db for m, db in per.items() if m != "exported"}
        best = min(alts, key=lambda m: alts[m]) if alts else ""
        better = best if best and alts[best] <= cur - BETTER_DB else ""
        out.append(TensorAdvice(tensor, tuple(a.consumers), cur, sources.get(tensor, "given"), a.amax, better,
                                candidates[tensor][better] if better else math.nan,
                                alts[better] if better else math.nan))
    return sorted(out, key=lambda t: -t.error_db)


def _sources_of(calibration, model) -> Tuple[Dict[str, str], Mapping]:
    """``(tensor -> where its range came from, tensor -> method -> RangeResult)`` of a calibration (empty for a mapping)."""
    from ..calibration.calibration import Calibration

    if not isinstance(calibration, Calibration):
        return {}, {}
    if calibration.method == "auto" and calibration.roles is None:  # as the export chose: with the graph's roles
        calibration = calibration.with_roles(model)
    return calibration.sources, calibration.ranges


def _amax_of(calibration) -> Mapping[str, float]:
    from ..calibration.calibration import Calibration

    return calibration.amax if isinstance(calibration, Calibration) else dict(calibration)
