"""Layout every figure with a title shares: the title kept clear of Plotly's toolbar.

Plotly draws its toolbar (the modebar: zoom, pan, download) over the top right corner of a
figure. A title at Plotly's default place, centred in the top margin, runs under it as soon as
it is long (a tensor's name and its range do), and the icons cover its end. So the title sits
just above the plot area, and the top margin is tall enough for the toolbar above the title.
"""

from __future__ import annotations

__all__ = ["TOOLBAR_PX", "clear_title"]

#: The band at the top of a figure that the toolbar takes (its icons are about 25 px high).
TOOLBAR_PX = 30
#: A title line of the figures' sizes (13-17 px fonts), with the gap under it.
_TITLE_PX = 30


def clear_title(fig, lines: int = 1):
    """Put ``fig``'s title under the toolbar band, just above the plot area; returns ``fig``.

    Parameters
    ----------
    fig : plotly Figure or FigureWidget
    lines : int
        Lines of title text (``<br>`` in it): the top margin grows with them.
    """
    top = fig.layout.margin.t
    need = TOOLBAR_PX + _TITLE_PX * max(1, int(lines))
    fig.update_layout(title=dict(yref="paper", y=1.0, yanchor="bottom", pad=dict(b=6)),
                      margin=dict(t=max(int(top) if top is not None else 0, need)))
    return fig
