"""One grammar for the judged commands (``export-qdq``, ``plan``, ``plan measure``, ``compare``, ``run``).

A flag means the same on every command that has it, with the same help text: :data:`FLAGS` holds
each one once and :func:`add_flags` adds the ones a command takes. ``--data`` is calibration data
everywhere and ``--held-back`` the held-back samples the candidates are judged on; the target is
``--target-cosine``, ``--target-snr``, ``--metric`` and ``--max-metric-drop`` (:func:`target`,
the one :class:`~trtwidgets.core.accuracy.target.Target` of the API). An old spelling keeps working
for one release and says so on stderr (:func:`add_deprecated`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Sequence

__all__ = ["FLAGS", "add_deprecated", "add_flags", "target"]

#: Every shared flag: its argparse keywords (the same on every command that has it).
FLAGS: Dict[str, Dict[str, Any]] = {
    "--data": dict(metavar="DIR", help="calibration samples: a folder of .npy/.npz files or images, or 'demo'"),
    "--held-back": dict(metavar="DIR", help="held-back samples the candidates are judged on (never calibrated "
                        "on): a folder of .npy/.npz files or images, or 'demo'"),
    "--target-cosine": dict(type=float, metavar="COS", help="the lowest cosine of the worst channel group of any "
                            "output against FP32 (default 0.99 when no other target is given)"),
    "--target-snr": dict(type=float, metavar="DB", help="the lowest SNR in dB of the worst channel group of any "
                         "output against FP32"),
    "--metric": dict(metavar="METRIC", help="a task metric against FP32 on the held-back samples: detection[:SCORE"
                     "[:OUTPUT[:IOU]]], detection-obj, top1-agreement, topk-agreement:K, mask-iou[:T[:OUTPUT]], "
                     "seg-miou, worst-group, cosine, top1 (with --labels), or your own package.module:function "
                     "taking (reference, candidate) -> float, higher is better (imported because you typed it; a "
                     "plan.json only names it)"),
    "--max-metric-drop": dict(type=float, metavar="DROP", help="how far --metric may fall below FP32's score "
                              "(default: the metric's own, 0.05 for detection F1, 0.01 for the others)"),
    "--labels": dict(metavar="FILE", help="integer class labels of the held-back samples (.npy, or .npz with one "
                     "array or one named 'labels'), in sample order, for --metric top1"),
    "--max-samples": dict(type=int, metavar="N", help="read at most this many samples"),
    "--keep-fp32": dict(nargs="+", default=[], metavar="PATTERN", help="keep these nodes' float math in FP32 (node "
                        "or output names, or op types): the float part's FP32 island, e.g. the Add and Log of a "
                        "log-spectrogram whose epsilon FP16 cannot hold"),
    "--no-progress": dict(action="store_true", help="no progress bars or lines"),
    "--json": dict(action="store_true", help="print the result as JSON (nothing else on standard output)"),
}


def add_flags(parser, names: Sequence[str], **overrides: Dict[str, Any]) -> None:
    """Add the shared flags ``names`` to ``parser`` (a command's own keywords, e.g. ``required``, in ``overrides``)."""
    for name in names:
        kw = dict(FLAGS[name])
        kw.update(overrides.get(name.lstrip("-").replace("-", "_"), {}))
        parser.add_argument(name, **kw)


class _Deprecated(argparse.Action):
    def __init__(self, option_strings, dest, new: str = "", **kw):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"note: {option_string} is deprecated: use {self.new} (the old spelling goes in the next release)",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated(parser, old: str, new: str, **kw) -> None:
    """``old`` as a hidden spelling of the shared flag ``new`` (same destination), saying so on stderr when used."""
    keys = {k: v for k, v in FLAGS[new].items() if k in ("type", "nargs", "metavar")}
    keys.update(kw)
    parser.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=_Deprecated, new=new,
                        help=argparse.SUPPRESS, **keys)


def target(args, default_cosine: bool = True, labels_alone: bool = False):
    """The :class:`~trtwidgets.core.accuracy.target.Target` the flags ask for (cosine >= 0.99 by default).

    ``args`` holds the four target flags and ``--labels`` (:func:`add_flags`).

    A ``package.module:function`` typed after ``--metric`` is imported here, before any work; an unknown
    name is refused. ``default_cosine`` False: no cosine unless ``--target-cosine`` is given (a metric
    alone is then the target, as ``plan`` and ``export-qdq`` take it). ``labels_alone``: ``--labels``
    without ``--metric`` is let through (the caller shows the labels' top-1 accuracy, not judged).
    """
    from ..core.accuracy.target import DEFAULT_COSINE, Target
    from ..core.common.errors import UserError

    metric, cosine, snr, drop = args.metric, args.target_cosine, args.target_snr, args.max_metric_drop
    labels = _labels(args.labels)
    if metric:
        from ..core.accuracy.task_metrics import check_metric_text, import_metric, is_function_text

        check_metric_text(metric)  # exit 2 before any work
        if is_function_text(metric.strip()):
            import_metric(metric)  # typed on this command line: imported here
        return Target.for_metric(metric, labels, cosine=cosine, snr_db=snr, max_metric_drop=drop)
    if labels is not None and not labels_alone:
        raise UserError("--labels without --metric.", "Labels are read by --metric top1.",
                        "Add --metric top1, or leave --labels out.")
    if cosine is None and snr is None and default_cosine:
        cosine = DEFAULT_COSINE
    return Target(cosine=cosine, snr_db=snr, max_metric_drop=drop)


def _labels(path):
    if not path:
        return None
    from ..core.qdq.validate import load_labels

    return load_labels(path)
