"""``python -m trtwidgets.cli``: the ``trtwidgets`` command without the console script."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
