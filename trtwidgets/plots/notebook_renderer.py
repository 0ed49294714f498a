"""Plotly figures that survive sharing: a notebook renderer with an HTML fallback.

Plotly's default Jupyter output is the ``application/vnd.plotly.v1+json`` mime type
alone, which JupyterLab draws but ``jupyter nbconvert --to html``, nbviewer and
GitHub do not: a shared notebook shows no figures. The renderer set here writes both
that mime type and a ``text/html`` rendering of every figure, and embeds plotly.js
once per notebook (on the first figure shown), so the exported page draws every
figure offline.
"""

from __future__ import annotations

#: JupyterLab draws the first part; nbconvert's HTML export, nbviewer and GitHub the second.
#: ``notebook`` (not ``notebook_connected``) inlines plotly.js instead of loading it from a CDN,
#: so the page works without network.
SHAREABLE_RENDERER = "plotly_mimetype+notebook"


def shareable_figures() -> str:
    """Make every Plotly figure shown in this kernel carry an HTML fallback.

    Call once near the top of a notebook. Figures displayed afterwards (a ``go.Figure``
    as a cell's last expression, ``fig.show()``, ``display(fig)``) output the Plotly JSON
    mime bundle *and* ``text/html``; plotly.js itself (about 4.7 MB) is embedded once,
    in the output of the first figure.

    Returns
    -------
    str
        The renderer set as ``plotly.io.renderers.default``.

    Notes
    -----
    ``FigureWidget`` outputs are widget views: nbconvert's page needs a widget manager
    from a CDN to draw them. :func:`trtwidgets.plots.share.share` (``tw.share``) writes
    an executed notebook as a page that draws them (and every other widget) from the
    saved state, offline; the App writes its own state with ``App.save_html``.
    """
    import plotly.io as pio

    pio.renderers.default = SHAREABLE_RENDERER
    return SHAREABLE_RENDERER
