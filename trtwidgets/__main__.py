import sys


def _run() -> int:
    # The import is inside the try: Ctrl-C while Python loads the command line is one line and exit 130 too.
    try:
        from trtwidgets.cli import main
    except KeyboardInterrupt:
        print("trtwidgets: interrupted before the command started; nothing was written.", file=sys.stderr)
        return 130
    return main()


sys.exit(_run())
