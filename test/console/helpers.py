"""What the console's browser tests share: the API and the CLI as a machine and an owner use
them, the pages' watchers (console errors, page errors, dialogs) and the DOM contract's
readings (the session page's actions, the hostile-markup scan).

Configured by scripts/console-test through the environment:
  CONSOLE_BASE_URL     the Worker (it serves the console at / and the API under /v1/)
  CONSOLE_RUN_DIR      where screenshots and logs go
  HANDOFF_CLI          the `handoff` binary (cli/ crate)
  HANDOFF_SIGNING_KEY  the local Worker's signing key (the development key by default)
  CONSOLE_CHROMIUM     Debian's Chromium (/usr/bin/chromium)
  CONSOLE_AXE          axe-core's axe.min.js (node_modules/axe-core)
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

TOP = pathlib.Path(__file__).resolve().parents[2]
BASE = os.environ.get("CONSOLE_BASE_URL", "http://127.0.0.1:8787").rstrip("/")
RUN_DIR = pathlib.Path(os.environ.get("CONSOLE_RUN_DIR", TOP / "target" / "console-test" / "adhoc"))
CLI = os.environ.get("HANDOFF_CLI", str(TOP / "target" / "debug" / "handoff"))
SIGNING_KEY = os.environ.get("HANDOFF_SIGNING_KEY", "handoff-development-key-do-not-deploy")
CHROMIUM = os.environ.get("CONSOLE_CHROMIUM", "/usr/bin/chromium")
AXE = os.environ.get("CONSOLE_AXE", str(TOP / "node_modules" / "axe-core" / "axe.min.js"))

# Debian's Chromium as root on a machine whose network is closed: no sandbox (root), no GPU,
# and none of the browser's own background connections (they are refused here, many at once).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every action the API may list, in its fixed order (the contract).
ALL_ACTIONS = ["open_turn", "cancel", "close", "report", "compile", "accept", "reject", "resolve_blocker", "answer"]
PACKAGE_ACTIONS = {"compile", "accept", "reject"}

_log_lock = threading.Lock()


def log(name: str, line: str) -> None:
    """Appends one line to RUN_DIR/<name>.log."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}"
    with _log_lock, open(RUN_DIR / f"{name}.log", "a", encoding="utf-8") as f:
        f.write(f"{stamp} {line}\n")


def unique(prefix: str) -> str:
    """A name no earlier run against the same Worker used: prefix-pid-milliseconds."""
    return f"{prefix}-{os.getpid()}-{int(time.time() * 1000)}"


def redact(text: str) -> str:
    return re.sub(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", "<token>", text)


# ---------------------------------------------------------------------------------------------
# The API, as docs/openapi.yaml says
# ---------------------------------------------------------------------------------------------


class ApiError(AssertionError):
    def __init__(self, method: str, path: str, status: int, body: str):
        super().__init__(f"{method} {path} answered {status}: {body[:500]}")
        self.status = status
        self.body = body


class Api:
    """Plain HTTP calls with a bearer token. Every state-changing call but create sends a fresh
    Idempotency-Key, as a careful client does."""

    def __init__(self, base: str = BASE):
        self.base = base

    def request(self, method: str, path: str, token: str | None, body=None, headers=None):
        """(status, headers, text) whatever the status."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if method in ("POST", "PUT") and path != "/v1/handoffs":
            req.add_header("Idempotency-Key", uuid.uuid4().hex)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as answer:
                status, hdrs, text = answer.status, dict(answer.headers), answer.read().decode()
        except urllib.error.HTTPError as e:
            status, hdrs, text = e.code, dict(e.headers), e.read().decode()
        log("api", f"{method} {path} -> {status}")
        return status, hdrs, text

    def call(self, method: str, path: str, token: str | None, body=None, ok=(200, 201)):
        status, _, text = self.request(method, path, token, body)
        if status not in ok:
            raise ApiError(method, path, status, text)
        return json.loads(text) if text else {}

    def get(self, path: str, token: str):
        return self.call("GET", path, token)

    def record(self, hid: str, token: str) -> dict:
        return self.get(f"/v1/handoffs/{hid}", token)["handoff"]

    def create(self, owner_token: str, session: str, machine: str = "vm-1", size: str = "large"):
        """(record, machine token)."""
        answer = self.call("POST", "/v1/handoffs", owner_token, {"session": session, "machine": machine, "size": size})
        return answer["handoff"], answer["machine_token"]


# ---------------------------------------------------------------------------------------------
# The command-line client, in another process (the machine's reporter, the owner's terminal)
# ---------------------------------------------------------------------------------------------


class Cli:
    def __init__(self, exe: str = CLI, base: str = BASE):
        self.exe = exe
        self.base = base

    def run(self, *args: str, token: str | None = None, json_out: bool = True, check: bool = True):
        env = dict(os.environ, HANDOFF_URL=self.base, HANDOFF_SIGNING_KEY=SIGNING_KEY)
        env.pop("HANDOFF_TOKEN", None)
        if token:
            env["HANDOFF_TOKEN"] = token
        argv = [self.exe] + (["--json"] if json_out else []) + list(args)
        started = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        log("cli", f"handoff {redact(' '.join(args))} -> exit {done.returncode} in {took:.2f} s")
        if done.stdout.strip():
            log("cli", "  stdout: " + redact(done.stdout.strip())[:2000])
        if done.stderr.strip():
            log("cli", "  stderr: " + redact(done.stderr.strip())[:2000])
        if check and done.returncode != 0:
            raise AssertionError(f"handoff {redact(' '.join(args))} exited {done.returncode}: {redact(done.stderr)}")
        if not json_out:
            return done.stdout
        text = done.stdout.strip()
        if not text:
            return {}
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return json.loads(text.splitlines()[-1])

    def owner_token(self, owner: str) -> str:
        return self.run("token", "--owner", owner, json_out=False).strip()


# ---------------------------------------------------------------------------------------------
# Pages: every console error, page error and dialog is recorded (and a dialog dismissed)
# ---------------------------------------------------------------------------------------------


class Watched:
    """A page with listeners on everything the tests forbid. `problems()` lists what happened."""

    def __init__(self, page, name: str):
        self.page = page
        self.name = name
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[tuple[str, str, dict]] = []
        page.on("console", self._on_console)
        page.on("pageerror", self._on_pageerror)
        page.on("dialog", self._on_dialog)
        page.on("request", self._on_request)
        page.on("response", self._on_response)
        page.on("requestfailed", lambda r: log("browser", f"[{self.name}] request failed: {r.method} {r.url} {r.failure}"))
        page.on("websocket", lambda ws: log("browser", f"[{self.name}] websocket {ws.url}"))

    def _on_console(self, msg):
        log("browser", f"[{self.name}] console.{msg.type}: {redact(msg.text)}")
        if msg.type == "error":
            loc = msg.location or {}
            self.console_errors.append(f"{redact(msg.text)} ({loc.get('url', '')}:{loc.get('lineNumber', '')})")

    def _on_pageerror(self, err):
        log("browser", f"[{self.name}] pageerror: {err}")
        self.page_errors.append(str(err))

    def _on_dialog(self, dialog):
        log("browser", f"[{self.name}] dialog {dialog.type}: {dialog.message}")
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        try:
            dialog.dismiss()
        except Exception:  # the page may be gone already
            pass

    def _on_request(self, req):
        self.requests.append((req.method, req.url, req.headers))

    def _on_response(self, resp):
        if resp.status >= 400 or "/v1/" in resp.url and resp.request.method != "GET":
            log("browser", f"[{self.name}] {resp.request.method} {resp.url} -> {resp.status}")

    def problems(self) -> list[str]:
        out = [f"console error: {e}" for e in self.console_errors]
        out += [f"page error: {e}" for e in self.page_errors]
        out += [f"dialog opened: {d}" for d in self.dialogs]
        return out

    def assert_clean(self) -> None:
        found = self.problems()
        assert not found, f"page {self.name}: " + "; ".join(found)


def shot(page, name: str, full_page: bool = True) -> pathlib.Path:
    path = RUN_DIR / "screenshots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=full_page)
    log("browser", f"screenshot {path}")
    return path


# ---------------------------------------------------------------------------------------------
# The DOM contract's readings
# ---------------------------------------------------------------------------------------------

VISIBLE_ACTIONS_JS = """
(root) => {
  const scope = document.querySelector(root) || document;
  const seen = [];
  for (const el of scope.querySelectorAll('button[data-action]')) {
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    seen.push({action: el.dataset.action, disabled: el.disabled || el.getAttribute('aria-disabled') === 'true',
               text: (el.textContent || '').trim()});
  }
  return seen;
}
"""


def visible_actions(page, root: str = "body") -> tuple[set[str], list[dict]]:
    buttons = page.evaluate(VISIBLE_ACTIONS_JS, root)
    return {b["action"] for b in buttons}, buttons


def assert_actions(page, api: Api, hid: str, token: str, label: str, root: str = "main#session",
                   only: set[str] | None = None) -> dict:
    """The visible buttons' data-action set on the page equals the record's `actions` (as the
    API answers this token), read once the page shows the record's version. `only` narrows
    both sides (the package page shows compile, accept and reject only). Returns the record."""
    from playwright.sync_api import expect

    rec = api.record(hid, token)
    assert "actions" in rec, f"{label}: the API's record has no `actions` (the Worker predates the contract): {rec}"
    expected = set(rec["actions"])
    if only is not None:
        expected &= only
    if root == "main#session":
        expect(page.locator("main#session")).to_have_attribute("data-version", str(rec["version"]), timeout=10_000)
    # The page may draw its buttons a tick after it sets the version: allow it 2 s to agree.
    deadline = time.monotonic() + 2.0
    while True:
        shown, buttons = visible_actions(page, root)
        if shown == expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    log("actions", f"{label}: v{rec['version']} api={rec['actions']} page={sorted(shown)} buttons={buttons}")
    assert shown == expected, (
        f"{label}: at version {rec['version']} ({rec['state']}/{rec['status']}) the page's buttons carry "
        f"data-action {sorted(shown)}, the API's actions are {rec['actions']}"
        + (f" (compared within {sorted(only)})" if only else "") + f"; buttons: {buttons}")
    disabled = [b for b in buttons if b["disabled"]]
    assert not disabled, f"{label}: disabled action buttons are shown: {disabled}"
    return rec


HOSTILE_DOM_JS = """
() => {
  const found = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/[\\u0000-\\u0020]/g, '').toLowerCase();
      if (name.startsWith('on')) found.push(`<${el.localName}> has ${attr.name}="${attr.value}"`);
      if (['href', 'src', 'action', 'formaction', 'xlink:href', 'srcdoc'].includes(name)
          && (value.startsWith('javascript:') || value.startsWith('data:text/html') || value.startsWith('vbscript:')))
        found.push(`<${el.localName}> has ${attr.name}="${attr.value}"`);
    }
    if (el.localName === 'script' && !el.src) found.push('an inline <script>: ' + el.textContent.slice(0, 80));
    if (el.localName === 'iframe' || el.localName === 'object' || el.localName === 'embed')
      found.push(`an <${el.localName}> element`);
  }
  for (const img of document.querySelectorAll('img')) {
    const src = img.getAttribute('src') || '';
    if (src === 'x' || src.endsWith('/x')) found.push('<img src=x> rendered as an image');
  }
  return found;
}
"""


def hostile_dom(page) -> list[str]:
    return page.evaluate(HOSTILE_DOM_JS)


# Roles whose element must carry a name; Playwright's ARIA snapshot writes `- role "name"`.
UNNAMED_RE = re.compile(
    r'^\s*- (button|link|textbox|combobox|listbox|checkbox|radio|spinbutton|searchbox|slider|switch|menuitem|tab)'
    r'(?=\s*(\[|:|$))', re.M)


def unnamed_controls(page, root: str = "body") -> list[str]:
    """Lines of the ARIA snapshot that name a control with no accessible name."""
    snapshot = page.locator(root).aria_snapshot()
    return [line.strip() for line in snapshot.splitlines() if UNNAMED_RE.match(line)]


def axe_serious(page, label: str) -> list[str]:
    """Runs axe-core on the page (its context must bypass CSP to take the injected script) and
    returns the serious and critical violations, one line each."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=AXE)
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').replace(/\\s+/g, ' '))}));
    }""")
    log("axe", f"{label}: {json.dumps(result)}")
    return [f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes'][:5]}"
            for v in result if v["impact"] in ("serious", "critical")]


def token_role(token: str) -> str:
    """The `role` of a JWT's payload (unverified: only to choose what a test expects)."""
    import base64

    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["role"]


def sign_in(watched: Watched, token: str, expect_hash: str | None = None) -> None:
    """Opens BASE/#token=<token>; the token leaves the address bar. A machine token goes to
    sessionStorage (handoff.token) and lands on #/s/<its hand-off>; an owner token signs the
    browser in as a device (kept nowhere: the page holds a short-lived access token in memory)
    and lands on #/."""
    from playwright.sync_api import expect

    page = watched.page
    page.goto(f"{BASE}/#token={token}")
    expect(page).not_to_have_url(re.compile(r"token="))
    if expect_hash is not None:
        expect(page).to_have_url(f"{BASE}/{expect_hash}")
    stored = page.evaluate("() => sessionStorage.getItem('handoff.token')")
    if token_role(token) == "machine":
        assert stored == token, f"sessionStorage handoff.token holds {stored!r}, not the token signed in with"
        return
    expect(page.locator("#who")).to_contain_text("(owner)")
    assert stored is None, "an owner token is exchanged for a device's sign-in, never kept"


def open_session(pages, owner_token: str, hid: str, name: str = "owner", live: bool = True,
                 before=None, **options) -> Watched:
    """A browser `name` signed in with the owner's token, on the session page of `hid`; with
    `live`, once its watch is live. `before(page)` runs first (an init script, say)."""
    from playwright.sync_api import expect

    w = pages(name, **options)
    if before is not None:
        before(w.page)
    sign_in(w, owner_token, expect_hash="#/")
    w.page.goto(f"{BASE}/#/s/{hid}")
    expect(w.page.locator("main#session")).to_have_attribute("data-id", hid)
    if live:
        expect(w.page.locator("#live")).to_have_text("live")
    return w


def composer_buttons(page) -> list[str]:
    """The composer's visible buttons, by id, in order."""
    return page.locator("form#composer button").evaluate_all(
        "bs => bs.filter(b => b.checkVisibility()).map(b => b.id)")


def api_session_ready_to_hand_off(api: Api, owner_token: str, compiled: bool = False,
                                  blocker: bool = True) -> tuple[str, str]:
    """A hand-off whose turn 1 is done, with work, a policy, a decision and (by default) an open
    blocker, and with `compiled` a package v1 offered: (id, machine token)."""
    record, machine_token = api.create(owner_token, unique("ready"))
    hid = record["id"]
    api.call("PUT", f"/v1/handoffs/{hid}/work", owner_token, {
        "title": "Billing schema", "goal": "Invoices survive a restart",
        "constraints": ["Postgres only"], "acceptance_criteria": ["Migrations apply cleanly"]})
    api.call("PUT", f"/v1/handoffs/{hid}/policy", owner_token,
             {"runtimes": ["claude-code", "codex"], "context_threshold_pct": 80})
    api.call("POST", f"/v1/handoffs/{hid}/decisions", machine_token,
             {"statement": "Use Postgres", "rationale": "the team runs it already",
              "evidence": ["https://example.com/adr/1"]})
    if blocker:
        api.call("POST", f"/v1/handoffs/{hid}/blockers", machine_token, {"severity": "medium", "title": "CI is red"})
    api.call("POST", f"/v1/handoffs/{hid}/report", machine_token,
             {"turn": 1, "status": "done", "summary": "Schema drafted on Postgres"})
    if compiled:
        api.call("POST", f"/v1/handoffs/{hid}/package", owner_token,
                 {"objective": "Write the migrations", "purpose": "Ship billing", "runtime": "codex"})
    return hid, machine_token


def machine_asks(hid: str, machine_token: str, text: str, kind: str = "permission",
                 options: tuple[str, ...] = ("allow=Allow", "deny=Deny")) -> subprocess.Popen:
    """The machine asks a question (by default a permission, allow or deny) on turn 1 from the CLI
    in another process, which waits there up to 60 s for the answer and prints the chosen option."""
    env = dict(os.environ, HANDOFF_URL=BASE, HANDOFF_SIGNING_KEY=SIGNING_KEY, HANDOFF_TOKEN=machine_token)
    chosen = [arg for option in options for arg in ("--option", option)]
    return subprocess.Popen(
        [CLI, "ask", hid, "--turn", "1", "--kind", kind, "--text", text, *chosen, "--wait", "60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
