import sys

from trtwidgets.cli import main

sys.exit(main())
