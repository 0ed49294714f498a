"""One GPU's share of :func:`trtwidgets.trt.measure.measure`'s builds (:mod:`.measure_builds`), in its own process.

``python -m trtwidgets.trt.measure_worker SPECS.json RESULTS.json`` builds each spec of
``SPECS.json`` (a list of :func:`~trtwidgets.trt.measure_builds.build_one` specs) on the GPU that
``CUDA_VISIBLE_DEVICES`` leaves visible, and rewrites ``RESULTS.json`` atomically after
each build, so the parent sees progress and keeps finished builds if it is interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core.common.atomic import write_text_atomic
from .measure_builds import build_one


def main(argv=None) -> int:
    """Build every spec; always 0 unless the arguments are wrong (a failed build is a result)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m trtwidgets.trt.measure_worker SPECS.json RESULTS.json", file=sys.stderr)
        return 2
    specs = json.loads(Path(args[0]).read_text())
    results = []
    for spec in specs:
        results.append(build_one(spec))
        write_text_atomic(args[1], json.dumps(results))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a module by measure()
    sys.exit(main())
