"""Links into the viewer open where they point (issue 36): the URL ``serve`` prints may carry a run beside the key
(``#key=KEY&run=RUN``, either order), a key the user chose to remember opens a ``#run=`` link (the form the eval
markdown writes) in a new tab without a paste, and an eval run's page names its suite, not a workflow. In Debian's
headless Chromium."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.evalseed import seed_argument_change
from tests.integration.test_viewer import ARGS, CHROMIUM, PAGE, SHOTS, _open


@pytest.fixture(scope="module")
def changed(host) -> dict[str, str]:
    """Two eval runs of one suite: a base, and a candidate regressed against it."""
    return seed_argument_change(host, host.client(host.key_a), host.key_a)


def test_a_link_with_the_key_beside_the_run_opens_the_run_and_drops_the_key(host, changed) -> None:
    from playwright.sync_api import sync_playwright

    # Given an eval run (a candidate of a suite, regressed against its base)
    run = changed["candidate"]
    assert Path(CHROMIUM).exists(), "Debian chromium is missing: run `make browser` (make test does)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for fragment in (
                f"key={quote(host.key_a, safe='')}&run={quote(run, safe='')}",
                f"run={quote(run, safe='')}&key={quote(host.key_a, safe='')}",
            ):
                # When a fresh page opens the viewer at the run with the key beside it
                page, console = _open(browser, host, url=f"{host.base_url}{PAGE}#{fragment}")
                page.wait_for_selector("#run-id:not(:empty)")
                page.wait_for_selector("#run-view:not([hidden])")
                # Then it shows that run, keeps the key for the session, and leaves only the run in the address bar
                assert page.text_content("#run-id") == run
                assert page.evaluate("sessionStorage.getItem('openwop.viewer.apiKey')") == host.key_a
                assert page.evaluate("location.hash") == f"#run={quote(run, safe='')}"
                requests = [m for m in console if m.startswith("request: ")]
                assert requests and not [u for u in requests if host.key_a in u], requests
                # and an eval run's page names its suite (never "workflow")
                page.wait_for_selector("#run-meta:not(:empty)")
                meta = page.text_content("#run-meta")
                assert meta.startswith("suite ") and "workflow" not in meta, meta
                assert not [m for m in console if m.startswith(("error", "pageerror"))], console
                page.close()
        finally:
            browser.close()


def test_a_remembered_key_opens_a_run_link_in_a_new_tab(host, changed) -> None:
    from playwright.sync_api import sync_playwright

    # Given a completed eval run and a viewer tab where the key was pasted with "remember in this browser"
    run = changed["base"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            first = context.new_page()
            first.goto(host.base_url + PAGE)
            first.fill("#api-key", host.key_a)
            first.check("#remember-key")
            first.click("#key-form button[type=submit]")
            first.wait_for_selector(f"tr.run-row[data-run-id='{run}']")
            # When a link of the form the eval markdown writes (#run= only) opens in a new tab of that browser
            tab = context.new_page()
            tab.goto(f"{host.base_url}{PAGE}#run={quote(run, safe='')}")
            tab.wait_for_selector("#run-view:not([hidden])")
            tab.wait_for_selector("#run-meta:not(:empty)")
            # Then the run opens with no paste
            assert tab.text_content("#run-id") == run
            assert tab.text_content("#status") != "paste an API key to start"
            SHOTS.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(SHOTS / "run-link-new-tab.png"), full_page=True)
            # When the key is forgotten, Then a new tab asks for it again
            tab.click("#forget-key")
            assert tab.evaluate("localStorage.getItem('openwop.viewer.apiKey')") is None
            again = context.new_page()
            again.goto(f"{host.base_url}{PAGE}#run={quote(run, safe='')}")
            again.wait_for_selector("#status:not(:empty)")
            assert again.text_content("#status") == "paste an API key to start"
            # and a key pasted without "remember" is kept for its tab only
            again.fill("#api-key", host.key_a)
            again.click("#key-form button[type=submit]")
            again.wait_for_selector("#run-view:not([hidden])")
            assert again.evaluate("localStorage.getItem('openwop.viewer.apiKey')") is None
        finally:
            browser.close()
