"""The app's tabs: their keys and titles, and the escaped HTML its steps render.

Each tab is a step widget in the module of its step (``LoadStep`` in
:mod:`~trtwidgets.widgets.model_loader`, ``FlagsStep`` in :mod:`~trtwidgets.widgets.flags`, ...);
:class:`~trtwidgets.widgets.app.App` composes them. This module holds what they share:
the tab order, and HTML fragments built from session values (pure strings, every
model-provided name escaped).
"""

from __future__ import annotations

from typing import Any, Dict

from .html import esc, html_table

#: Step keys in tab order; the tab titles are :data:`STEPS`.
STEP_KEYS = ("load", "flags", "calibrator", "calibrate", "plan", "build", "inspect", "explore")
#: Tab titles, short enough for ipywidgets' tab bar (longer ones are cut: "3 Calibrator & pro").
STEP_TITLES = {"load": "Load", "flags": "Flags", "calibrator": "Profiles", "calibrate": "Calibrate",
               "plan": "Plan", "build": "Build", "inspect": "Inspect", "explore": "Explore"}
STEPS = tuple(f"{i + 1} {STEP_TITLES[k]}" for i, k in enumerate(STEP_KEYS))
LOAD, FLAGS, CALIBRATOR, CALIBRATE, PLAN, BUILD, INSPECT, EXPLORE = range(len(STEP_KEYS))
#: What each tab holds, for the title's tooltip-free reader: the header line of the app.
HEADER = ("<b>trtwidgets</b>: model &rarr; flags &rarr; calibrator &amp; profiles &rarr; calibrate &rarr; plan "
          "&rarr; build &rarr; inspect &rarr; explore")
#: Tabs wide enough for their titles, in every theme (ipywidgets fixes tab width and cuts the rest).
TAB_CSS = ("<style>.trtw-app .lm-TabBar-tab, .trtw-app .p-TabBar-tab "
           "{flex: 0 0 auto !important; min-width: fit-content !important; max-width: none !important;}</style>")


def banner(kind: str, html: str) -> str:
    """A coloured note (``warning``, ``info`` or ``ok``); ``html`` must be escaped by the caller."""
    color = {"warning": "#e37400", "info": "#1a73e8", "ok": "#188038"}[kind]
    return (f'<div class="trtw-{kind}" style="border-left:4px solid {color};padding:2px 8px;margin:4px 0">'
            f"{html}</div>")


def stale_html(stale) -> str:
    """The banner naming stale results and why ('' when all are current)."""
    if not stale:
        return ""
    items = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in sorted(stale.items()))
    return banner("warning", "<b>Out of date</b> (kept; redo the step to refresh it):"
                             f"<ul style='margin:2px 0'>{items}</ul>")


def problems_html(problems) -> str:
    """The recipe's problems as they stand ('' when none)."""
    if not problems:
        return ""
    return banner("warning", "<b>The recipe as it stands:</b><ul style='margin:2px 0'>"
                  + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")


def calibration_html(session) -> str:
    """The calibrate step's result: samples, tensors, and the ten tensors with the lowest SQNR (the session
    has a calibration)."""
    from ..core.calibration.ranges import METHODS

    s = session
    cal = s.calibration
    ranges = cal.ranges
    method = cal.method
    chosen = {name: c.method for name, c in cal.choices.items()}  # auto: per tensor
    rows = []

    def exported(name, per):
        m = chosen.get(name, method)
        return per[m] if m in per else None

    worst = sorted(ranges.items(), key=lambda kv: exported(*kv).sqnr_db if exported(*kv) is not None else 0)[:10]
    for name, per in worst:
        row: Dict[str, Any] = {"tensor": name}
        row.update({m: f"{per[m].amax:.4g}" for m in METHODS if m in per})
        row["SQNR dB"] = f"{exported(name, per).sqnr_db:.1f}" if exported(name, per) is not None else ""
        rows.append(row)
    head = (f"{s.stats.samples} samples from {esc(cal.data or 'the given data')}, "
            f"{len(s.stats.tensors)} tensors; exported method <b>{esc(method)}</b>. "
            f"Explore every tensor in step {EXPLORE + 1}.")
    columns = ["tensor"] + list(METHODS) + ["SQNR dB"]
    return banner("ok", head) + html_table(rows, columns, caption=f"The 10 tensors with the lowest {method} SQNR "
                                                                  "(amax per method)")


def performance_html(label: str, build, trt_available: bool) -> str:
    """The latency a build recorded, and what accuracy needs."""
    from ..core.engine.build_records import performance_record

    rec = performance_record(build, trt_available)
    meta = getattr(build, "meta", None) or {}
    where = " on ".join(x for x in (f"TensorRT {meta['trt_version']}" if meta.get("trt_version") else "",
                                    meta.get("gpu_name") or "") if x)
    if rec.latency is not None:
        head = (f"<b>{esc(label)}</b> recorded a median latency of {rec.latency.median_ms:.4f} ms "
                f"({rec.latency.runs} runs{', ' + esc(where) if where else ''}). ")
    else:
        head = f"<b>{esc(label)}</b> recorded no latency. "
    return banner("info", head + esc(rec.note))


def builds_html(graphs, stale) -> str:
    """The session's builds, one row each."""
    if not graphs:
        return ""
    return html_table([{"build": k, "layers": len(g.layers), "status": stale.get(f"build:{k}", "current")}
                       for k, g in graphs.items()], ["build", "layers", "status"], caption="Builds in this session")


def held_back_html(folder: str, has_model: bool = True) -> str:
    """What the held-back data is: the folder, or the seeded split the Plan step makes ('' without a model)."""
    from ..core.calibration.held_back import HOLDOUT, SEED

    if not has_model:
        return ""
    if folder:
        return banner("info", f"<b>Held back</b>: the samples in <code>{esc(folder)}</code>, kept out of calibration. "
                              f"The Plan step ({PLAN + 1}) measures accuracy on them, and the explorer's "
                              "<i>Export Q/DQ model</i> checks its export on them.")
    return banner("info", f"<b>No held-back folder</b>: the Plan step ({PLAN + 1}) holds back a seeded "
                          f"{HOLDOUT:.0%} of the calibration data (seed {SEED}) and lists the files of each side "
                          "with the plan. Give a folder of other samples here to judge accuracy on data the "
                          "calibration never saw (as <code>trtwidgets plan --held-back</code> does).")
