"""Plotly figures that update in place, without a copy of plotly.js in the widget state.

Plotly's ``go.FigureWidget`` is an anywidget whose front-end module (``_esm``) is the
whole plotly.js bundle, 5 MB, held as a synced trait: every FigureWidget stores it in
the notebook's saved widget state, and an exported page carried one copy per figure
(ten in the quickstart, 52 MB). :func:`live_figure` makes the same FigureWidget with a
front-end module of a few lines instead. The first figure of a page asks its kernel
for the bundle once, over the widget's own message channel (custom messages are never
part of the saved state), and every later figure of the page reuses that module.
Everything else (``batch_update``, ``on_click``, the Python API) is plotly's own.

A page without a kernel (an exported notebook) draws these figures from their saved
data and layout instead: :func:`trtwidgets.plots.share.share` does, with plotly.js
once per page.
"""

from __future__ import annotations

import functools
from pathlib import Path

# Imported only where a live figure is made (the Display classes import this module inside figure()).
import plotly
import plotly.basewidget as basewidget
import plotly.graph_objects as go

#: The custom message a view sends to ask for plotly's widget bundle, and the answer's type.
BUNDLE_REQUEST = "trtwidgets:plotly-bundle?"
BUNDLE_REPLY = "trtwidgets:plotly-bundle"

# The loader. anywidget calls the default export once per model. The bundle's own default
# export is a factory of {initialize, render} with per-model state, so each model gets
# its own instance of it; the module itself is imported once per page (globalThis cache,
# keyed by plotly's version so that two plotly versions in one page never mix).
_LOADER_JS = """
const KEY = "__trtwidgets_plotly_bundle__";
function bundle(model, version) {
  const cache = (globalThis[KEY] = globalThis[KEY] || {});
  if (!cache[version]) {
    cache[version] = new Promise((resolve, reject) => {
      const onMessage = (msg, buffers) => {
        if (!msg || msg.type !== "%(reply)s") return;
        model.off("msg:custom", onMessage);
        const url = URL.createObjectURL(new Blob([buffers[0]], { type: "text/javascript" }));
        import(url).then(resolve, reject);
      };
      model.on("msg:custom", onMessage);
      model.send({ type: "%(request)s" });
    });
    cache[version].catch(() => { delete cache[version]; });
  }
  return cache[version];
}
export default () => {
  let inner = null;
  let ready = null;
  const start = (model) => {
    if (!ready) {
      ready = bundle(model, "%(version)s").then(async (mod) => {
        const made = typeof mod.default === "function" ? await mod.default() : mod.default;
        inner = made;
        return made;
      });
    }
    return ready;
  };
  return {
    async initialize(ctx) {
      const made = await start(ctx.model);
      return made.initialize ? made.initialize(ctx) : undefined;
    },
    async render(ctx) {
      const made = await start(ctx.model);
      return made.render(ctx);
    },
  };
};
"""


@functools.lru_cache(maxsize=1)
def _bundle_bytes() -> bytes:
    """plotly's FigureWidget front-end module (plotly.js included), read once per process."""
    source = basewidget.BaseFigureWidget._esm
    # anywidget turns a file path into FileContents (str() is the text); plotly names a Path.
    if isinstance(source, (str, Path)) and Path(str(source)).is_file():
        return Path(str(source)).read_bytes()
    return str(source).encode("utf-8")


def _answer(widget, content, buffers) -> None:
    if isinstance(content, dict) and content.get("type") == BUNDLE_REQUEST:
        widget.send({"type": BUNDLE_REPLY}, buffers=[_bundle_bytes()])


class LiveFigureWidget(go.FigureWidget):
    """A ``go.FigureWidget`` that fetches plotly's front-end from its kernel once per page."""

    _esm = _LOADER_JS % {"reply": BUNDLE_REPLY, "request": BUNDLE_REQUEST, "version": plotly.__version__}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_msg(_answer)


def live_figure(fig=None):
    """``fig`` as a FigureWidget that updates in place and keeps plotly.js out of the widget state.

    Parameters
    ----------
    fig : plotly figure or dict, optional
        The finished figure (a FigureWidget made from it starts with all of it in its
        initial state; one built empty and filled trace by trace kept plotly's default
        bar colour in the browser).

    Returns
    -------
    plotly.graph_objects.FigureWidget
    """
    return LiveFigureWidget() if fig is None else LiveFigureWidget(fig)
