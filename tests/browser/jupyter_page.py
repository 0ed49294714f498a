"""Driving a notebook in a real JupyterLab page (shared by the browser tests)."""

from __future__ import annotations

# A prompt that shows a queued ("[*]") or finished ("[3]") cell.
_STARTED = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                  .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""
_KERNEL_READY = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return k && k.connectionStatus === 'connected' && k.status === 'idle';
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
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: send the command again
            page.wait_for_timeout(2000)
    raise AssertionError(f"JupyterLab ran no cell after {attempts} run-all commands")
