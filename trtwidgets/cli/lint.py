"""``trtwidgets lint MODEL [--flags fp16,int8] [--trt-version X.Y] [--calibrator NAME] [--json]``.

Says what would go wrong in TensorRT before the build. Exit status 0 when there
is no error finding, 1 when there is, 2 for bad input (see :mod:`trtwidgets.cli`).
"""

from __future__ import annotations

import json
import textwrap

NAME = "lint"
HELP = "what would go wrong building an ONNX model with TensorRT, before the build"
DESCRIPTION = (HELP + ". Exit status: 0 no errors, 1 error findings, 2 bad input. "
               "Codes and severities are stable; --json prints a list of findings.")


def add_arguments(parser):
    parser.add_argument("model", help="path of the .onnx file")
    parser.add_argument("--flags", default=None,
                        help="intended precision flags, comma separated (fp16,int8,fp8,bf16,tf32); '' means FP32")
    parser.add_argument("--trt-version", default=None, metavar="X.Y",
                        help="TensorRT version to check against (8.6, 10.16, 11.0) or 'installed'")
    parser.add_argument("--calibrator", default=None,
                        help="none, toolkit, or a TensorRT calibrator: entropy2, minmax, entropy, legacy")
    parser.add_argument("--gpu", default=None, metavar="CC", help="GPU compute capability, e.g. 8.9")
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")


def format_findings(findings, width: int = 100) -> str:
    """Findings as plain text, one block per finding."""
    if not findings:
        return "no findings"
    blocks = []
    for f in findings:
        lines = textwrap.wrap(f"{f.severity.upper():7} {f.code}: {f.message}", width, subsequent_indent="        ")
        for label, text in (("why", f.why), ("fix", f.fix)):
            if text:
                lines += textwrap.wrap(f"{label}: {text}", width, initial_indent="        ",
                                       subsequent_indent="             ")
        blocks.append("\n".join(lines))
    n_err = sum(f.severity == "error" for f in findings)
    n_warn = sum(f.severity == "warning" for f in findings)
    blocks.append(f"{n_err} error(s), {n_warn} warning(s), {len(findings) - n_err - n_warn} info")
    return "\n".join(blocks)


def run(args) -> int:
    from ..core.model.lint import has_errors, lint

    findings = lint(args.model, flags=args.flags, trt_version=args.trt_version, calibrator=args.calibrator,
                    gpu_compute_capability=args.gpu)
    print(json.dumps([f.to_dict() for f in findings], indent=2) if args.json else format_findings(findings))
    return 1 if has_errors(findings) else 0
