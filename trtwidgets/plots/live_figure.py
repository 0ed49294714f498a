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
from copy import deepcopy
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
  if (cache[version]) return cache[version];
  // Each model asks with its own listener until the module is in: the kernel answers the model that asked.
  return new Promise((resolve, reject) => {
    const onMessage = (msg, buffers) => {
      if (!msg || msg.type !== "%(reply)s") return;
      model.off("msg:custom", onMessage);
      if (!cache[version]) {
        const url = URL.createObjectURL(new Blob([buffers[0]], { type: "text/javascript" }));
        cache[version] = import(url);
        cache[version].catch(() => { delete cache[version]; });
      }
      cache[version].then(resolve, reject);
    };
    model.on("msg:custom", onMessage);
    model.send({ type: "%(request)s" });
  });
}
export default () => {
  let ready = null;
  const start = (model) => {
    if (!ready) {
      ready = bundle(model, "%(version)s").then(async (mod) =>
        typeof mod.default === "function" ? await mod.default() : mod.default);
      ready.catch(() => { ready = null; });
    }
    return ready;
  };
  return {
    initialize(ctx) {
      // Not awaited: the kernel connection handles one message at a time, and this model's comm_open is that
      // message until initialize returns, so the bundle's reply would wait behind it for ever.
      start(ctx.model).then((made) => made.initialize && made.initialize(ctx));
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
    """A ``go.FigureWidget`` that fetches plotly's front-end from its kernel once per page.

    Its ``_widget_data`` and ``_widget_layout`` follow every change (plotly sets them only
    when the figure is made and shown, and sends changes as deltas): a view drawn after a
    change (plotly's front-end arrives a moment after the model) and the saved widget state
    (what :func:`trtwidgets.plots.share.share` draws) both show the figure as it is.
    """

    _esm = _LOADER_JS % {"reply": BUNDLE_REPLY, "request": BUNDLE_REQUEST, "version": plotly.__version__}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_msg(_answer)

    def _keep_state(self) -> None:
        self._widget_layout = deepcopy(self._layout_obj._props)
        self._widget_data = deepcopy(self._data)

    def _send_relayout_msg(self, *args, **kwargs):
        super()._send_relayout_msg(*args, **kwargs)
        self._keep_state()

    def _send_restyle_msg(self, *args, **kwargs):
        super()._send_restyle_msg(*args, **kwargs)
        self._keep_state()

    def _send_addTraces_msg(self, *args, **kwargs):
        super()._send_addTraces_msg(*args, **kwargs)
        self._keep_state()

    def _send_moveTraces_msg(self, *args, **kwargs):
        super()._send_moveTraces_msg(*args, **kwargs)
        self._keep_state()

    def _send_update_msg(self, *args, **kwargs):
        super()._send_update_msg(*args, **kwargs)
        self._keep_state()

    def _send_animate_msg(self, *args, **kwargs):
        super()._send_animate_msg(*args, **kwargs)
        self._keep_state()

    def _send_deleteTraces_msg(self, *args, **kwargs):
        super()._send_deleteTraces_msg(*args, **kwargs)
        self._keep_state()


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
