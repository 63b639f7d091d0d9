"""The console's headers and its page: a strict Content-Security-Policy, and nothing inline."""

import re
import urllib.request

from helpers import BASE


def fetch(path: str):
    with urllib.request.urlopen(BASE + path, timeout=30) as answer:
        return answer.status, answer.headers, answer.read().decode()


def directives(policy: str) -> dict[str, list[str]]:
    out = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            out[words[0].lower()] = words[1:]
    return out


def test_the_console_is_served_with_a_strict_content_security_policy():
    status, headers, body = fetch("/")
    assert status == 200
    assert headers.get("Content-Type", "").startswith("text/html"), headers.get("Content-Type")
    policy = headers.get("Content-Security-Policy")
    assert policy, f"GET / has no Content-Security-Policy; headers: {dict(headers)}"
    d = directives(policy)
    assert d.get("script-src") == ["'self'"], f"script-src is {d.get('script-src')} in {policy!r}"
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy, policy
    assert d.get("default-src") == ["'none'"], f"default-src is {d.get('default-src')} in {policy!r}"
    for name in ("style-src", "connect-src", "base-uri", "form-action", "frame-ancestors"):
        assert name in d, f"{name} missing from {policy!r}"
    assert headers.get("X-Content-Type-Options") == "nosniff"
    assert headers.get("Referrer-Policy") == "no-referrer"


def test_the_page_has_no_inline_script_or_style_attribute():
    _, _, body = fetch("/")
    for tag in re.findall(r"<script\b[^>]*>", body, re.I):
        assert re.search(r"\bsrc=", tag, re.I), f"an inline script in index.html: {tag}"
    assert not re.search(r"<script\b[^>]*>(?!\s*</script>)", body, re.I), "a script element with a body"
    assert not re.search(r"\sstyle\s*=", body, re.I), "a style attribute in index.html"
    assert not re.search(r"\son[a-z]+\s*=", body, re.I), "an event-handler attribute in index.html"


def test_the_api_stays_under_v1():
    status, headers, body = fetch("/v1/health")
    assert status == 200 and '"ok":true' in body.replace(" ", "")
