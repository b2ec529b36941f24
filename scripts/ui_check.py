"""A batch's run as a user sees it in the Dagster UI, checked in a real headless browser.

Against a webserver already serving the instance (URL): the job's Runs tab lists the run, the
overview timeline has a row for the job, the run's page offers "Re-execute all" with no warning
("a different code location", "may be different"), and clicking it starts a new run of the job.
Prints one line per check and exits 1 if one fails.

Needs Python playwright (`.venv/bin/pip install playwright`; no browser download: it drives the
system's Chromium, `apt-get install chromium`). tests/slow/cli/test_ui_runs.py calls `check` when
both are there; by hand:

    .venv/bin/python scripts/ui_check.py http://127.0.0.1:3000 daily_batch RUN_ID
"""

from __future__ import annotations

import sys
from collections.abc import Callable

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WARNINGS = ("different code location", "may be different", "could not be found", "not available")
TIMEOUT_MS = 60_000


def check(url: str, job: str, run_id: str, say: Callable[[str], None] = print) -> str:
    """Every check above, said as it passes (AssertionError at the first that fails); returns
    the id of the run "Re-execute all" started."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            # The job's Runs tab ("No runs found" when the run names no code location).
            page.goto(f"{url}/locations/endless/jobs/{job}/runs")
            _skip_welcome(page)
            _reload_after_a_client_error(page)
            expect(page.get_by_text(run_id[:8]).first).to_be_visible()
            say(f"job {job}, Runs tab: run {run_id[:8]} listed")
            # The overview timeline: a row for the job, with the run in it.
            page.goto(f"{url}/overview/activity/timeline")
            expect(page.get_by_text(job, exact=True).first).to_be_visible()
            say(f"overview timeline: a row for {job}")
            # The run's page: Re-execute all, without a warning icon or tooltip.
            page.goto(f"{url}/runs/{run_id}")
            button = page.get_by_role("button", name="Re-execute all")
            expect(button).to_be_enabled()
            button.hover()
            shown = page.inner_text("body")
            icons = button.locator("[aria-label=warning], [data-icon=warning]").count()
            found = [w for w in WARNINGS if w in shown]
            assert not found and icons == 0, f"Re-execute warns: {found or 'a warning icon'}"
            say("run page: Re-execute all offered with no warning")
            button.click()
            page.wait_for_url(lambda u: "/runs/" in u and run_id not in u)
            new_run = page.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0]
            say(f"Re-execute all: started run {new_run[:8]} of {job}")
            return new_run
        finally:
            browser.close()


def _reload_after_a_client_error(page) -> None:
    """Reload a page the UI's client failed to render ("Application error: a client-side
    exception"), once: seen on a loaded 2-core machine, and not what is being checked."""
    from playwright.sync_api import TimeoutError as Rendered

    crashed = page.get_by_text("Application error: a client-side exception")
    try:
        crashed.first.wait_for(state="visible", timeout=3_000)
    except Rendered:
        return
    page.reload()
    _skip_welcome(page)


def _skip_welcome(page) -> None:
    """Dismiss the first visit's newsletter dialog, if it shows."""
    from playwright.sync_api import TimeoutError as NotShown

    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=5_000)
    except NotShown:
        return
    skip.click()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: ui_check.py URL JOB RUN_ID")
    try:
        check(*sys.argv[1:])
    except AssertionError as exc:
        print(f"FAILED: {exc}")
        sys.exit(1)
