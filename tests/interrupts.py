"""A sample source that stops as Ctrl-C would: the edge that interrupted-run tests replace."""

from __future__ import annotations


class InterruptAfter:
    """Yields ``n`` real demo samples, then raises KeyboardInterrupt, as Ctrl-C would during calibration."""

    def __init__(self, n):
        from trtwidgets import demo

        self.feeds = demo.sample_inputs(1)[:n]

    def __iter__(self):
        yield from self.feeds
        raise KeyboardInterrupt
