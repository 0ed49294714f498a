"""One GPU's share of :func:`trtwidgets.trt.measure.measure`'s builds (:mod:`.measure_builds`), in its own process.

``python -m trtwidgets.trt.measure_worker SPECS.json RESULTS.json`` builds each spec of
``SPECS.json`` (a list of :func:`~trtwidgets.trt.measure_builds.build_one` specs) on the GPU that
``CUDA_VISIBLE_DEVICES`` leaves visible, and rewrites ``RESULTS.json`` atomically after
each build, so the parent sees progress and keeps finished builds if it is interrupted.

A build that breaks the process's CUDA context (a sticky error such as an illegal memory access
while TensorRT times a kernel: every later build here would fail with it) ends the worker with
:data:`CONTEXT_BROKEN`; the parent starts a new worker for the specs left.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.common.atomic import write_text_atomic
from .measure_builds import CONTEXT_BROKEN, build_one


def main(argv=None) -> int:
    """Build every spec; 0 (a failed build is a result), :data:`CONTEXT_BROKEN` when a failed build left this
    process's CUDA context unusable with specs still to build, 2 when the arguments are wrong."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m trtwidgets.trt.measure_worker SPECS.json RESULTS.json", file=sys.stderr)
        return 2
    specs = json.loads(Path(args[0]).read_text())
    results = []
    for spec in specs:
        results.append(build_one(spec))
        write_text_atomic(args[1], json.dumps(results))
        if results[-1]["error"] and len(results) < len(specs):
            from .cuda import context_broken

            if context_broken():
                return CONTEXT_BROKEN
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a module by measure()
    sys.exit(main())
