"""``trtwidgets share NOTEBOOK --out PAGE``: an executed notebook as one page that opens offline."""

from __future__ import annotations

NAME = "share"
HELP = "write an executed notebook as one self-contained HTML page (widgets, figures and formulas drawn offline)"
DESCRIPTION = (HELP + ". Nothing is executed: run the notebook first and save it with its outputs. plotly.js is "
               "embedded once (--plotlyjs cdn loads it from plotly's CDN instead). The notebook's outputs are not "
               "trusted: their scripts, event handlers and javascript: links are removed (the page says what went); "
               "--trust keeps them.")
OUTPUTS = {"out": "file"}


def add_arguments(parser):
    parser.add_argument("notebook", help="the executed .ipynb")
    parser.add_argument("--out", required=True, help="the page to write (.html)")
    parser.add_argument("--plotlyjs", choices=("inline", "cdn"), default="inline",
                        help="embed plotly.js once (default; opens offline) or load it from plotly's CDN")
    parser.add_argument("--title", default=None, help="the page's title (default: the notebook's file name)")
    parser.add_argument("--trust", action="store_true",
                        help="keep the scripts, event handlers and other active HTML of the notebook's outputs "
                             "(default: removed, and the page says what went, as Jupyter does not run a notebook's "
                             "JavaScript it did not run itself); only for a notebook you made yourself")


def run(args) -> int:
    from ..plots.share import share

    print(share(args.notebook, args.out, plotlyjs=args.plotlyjs, title=args.title, trust=args.trust))
    return 0
