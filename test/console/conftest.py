"""Fixtures of the console's browser tests: one Chromium per test module (Debian's, through
Playwright's executable_path), pages that record every console error, page error and dialog,
and a screenshot of every open page when a test fails."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
from playwright.sync_api import expect, sync_playwright

from helpers import BASE, CHROMIUM, CHROMIUM_ARGS, RUN_DIR, Api, Cli, Watched, log

# The 2-second rules pass timeout=2000 where they apply; everything else may take its time.
expect.set_options(timeout=10_000)


def pytest_configure(config):
    RUN_DIR.mkdir(parents=True, exist_ok=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def pw():
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(pw, request):
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: scripts/install installs Debian's chromium")
    b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    log("browser", f"{request.module.__name__}: Chromium {b.version}")
    yield b
    b.close()


@pytest.fixture(scope="session")
def api():
    return Api(BASE)


@pytest.fixture(scope="session")
def cli():
    return Cli()


@pytest.fixture
def pages(browser, request):
    """A factory: pages(name, **context options) -> Watched, each in a context of its own (so
    each has its own sessionStorage, as a new tab would). On teardown: screenshots of every page
    when the test failed, then every page must have seen no console error, page error or dialog
    (a test that expects one clears it from the Watched first)."""
    opened: list[tuple[object, Watched]] = []

    def open_page(name: str, **options) -> Watched:
        options.setdefault("viewport", {"width": 1280, "height": 800})
        context = browser.new_context(**options)
        context.set_default_timeout(15_000)
        page = context.new_page()
        watched = Watched(page, f"{request.node.name}/{name}")
        opened.append((context, watched))
        return watched

    yield open_page

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    problems = []
    for context, watched in opened:
        if failed:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", watched.name)
            path = RUN_DIR / "failures" / f"{safe}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                watched.page.screenshot(path=str(path), full_page=True)
                (RUN_DIR / "failures" / f"{safe}.html").write_text(watched.page.content(), encoding="utf-8")
                log("browser", f"failure screenshot {path} at {watched.page.url}")
            except Exception as e:  # a crashed page still lets the others be saved
                log("browser", f"no failure screenshot of {watched.name}: {e}")
        problems += [f"{watched.name}: {p}" for p in watched.problems()]
        context.close()
    if problems and not failed:
        pytest.fail("the pages saw what no page may: " + "; ".join(problems))


def pytest_report_header(config):
    return [f"console: {BASE}", f"run folder: {RUN_DIR}", f"chromium: {CHROMIUM}",
            f"CONSOLE_SCREENSHOT_README: {os.environ.get('CONSOLE_SCREENSHOT_README', '')!r}"]
