"""``python -m trtwidgets.cli``: the ``trtwidgets`` command without the console script."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":  # a Dask worker started by spawn imports this module again: it must not run main
    sys.exit(main())
