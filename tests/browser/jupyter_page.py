"""Driving a notebook in a real JupyterLab page (shared by the browser tests)."""

from __future__ import annotations

import contextlib

CHROMIUM = "/usr/bin/chromium"
# Chromium's background services try to reach Google; the network here is closed.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]

# A prompt that shows a queued ("[*]") or finished ("[3]") cell.
_STARTED = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                  .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""
_KERNEL_READY = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""
# Done when every code cell has run ("[n]:"), or one failed (run-all stops there), and the kernel is idle.
# Checking only for the absence of "[*]" would pass at once, before the first cell is even queued.
_ALL_RAN = """() => {
    const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(e => e.textContent);
    const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
    const idle = ind && ind.dataset.status === 'idle' && prompts.every(t => !t.includes('*'));
    const failed = document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
    return prompts.length > 0 && idle && (prompts.every(t => /\\d/.test(t)) || failed !== null);
}"""


def run_all_cells(page, attempts: int = 4) -> None:
    """Run every cell through JupyterLab's own command, again if no cell started.

    The execution indicator can say idle before the kernel's connection is up, and a run-all
    sent then is lost (seen in CI under load: every prompt stayed empty, the kernel idle). So
    wait for a connected, idle kernel, and repeat the command until some cell is queued or ran.
    """
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands.hasCommand('notebook:run-all-cells')",
                           timeout=120_000)
    page.wait_for_function(_KERNEL_READY, timeout=180_000, polling=500)
    for _ in range(attempts):
        # Not awaited: the command's promise settles only when every cell has run, and never when the
        # kernel dropped the request, and page.evaluate has no timeout (a hang seen in CI).
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        try:
            page.wait_for_function(_STARTED, timeout=30_000, polling=500)
            return
        except Exception:
            page.wait_for_timeout(2000)
    raise AssertionError(f"JupyterLab ran no cell after {attempts} run-all commands")


_WHERE = """() => {
    const cells = [...document.querySelectorAll('.jp-CodeCell')];
    const prompts = cells.map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '');
    const running = prompts.findIndex(t => t.includes('*'));
    const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
    const cell = running >= 0 ? cells[running] : null;
    return {prompts: prompts.join(' '), running: running,
            source: cell ? (cell.querySelector('.jp-InputArea-editor') || {}).innerText || '' : '',
            output: cell ? (cell.querySelector('.jp-OutputArea') || {}).innerText || '' : '',
            kernel: ind ? ind.dataset.status : null};
}"""


def where_it_stands(page) -> str:
    """The code cells' prompts, the running cell's source and output, the kernel's status (for a timeout)."""
    try:
        w = page.evaluate(_WHERE)
    except Exception as exc:
        return f"(the page could not be read: {exc})"
    return (f"kernel {w['kernel']}; prompts {w['prompts']}; code cell {w['running']} running: "
            f"{w['source'][:400]!r}; its output so far: {w['output'][-600:]!r}")


@contextlib.contextmanager
def notebook_after_run_all(base: str, token: str, notebook: str):
    """A Chromium page on ``notebook`` in the JupyterLab at ``base``, every cell run (or run-all stopped by an error).

    Yields the Playwright page; the browser closes when the block ends.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/lab/tree/{notebook}?token={token}", timeout=120_000)
        page.wait_for_selector(".jp-Notebook", timeout=120_000)
        run_all_cells(page)
        # A hang guard, not a speed test: a fresh CI venv's first kernel compiles plotly and pandas, and on a
        # shared 2-core machine the calibration notebook has run past 300 s there (122 s when warm).
        try:
            page.wait_for_function(_ALL_RAN, timeout=600_000, polling=1000)
        except Exception as exc:
            raise AssertionError(f"run-all did not finish: {where_it_stands(page)}") from exc
        page.wait_for_timeout(3000)  # let widget views and Plotly finish drawing
        yield page
        browser.close()
