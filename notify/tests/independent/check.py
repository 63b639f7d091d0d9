"""Checks the crate's output with implementations written by others.

Reads one JSON document on stdin: {"webhooks": [...], "pushes": [...], "vapid": [...]}, and
prints one JSON document: for each case, what the independent implementation made of it.
Webhooks: the `standardwebhooks` package (the specification's reference library). Push
bodies: `http_ece` (RFC 8188/8291, used by pywebpush). VAPID tokens: `cryptography`'s ECDSA.
"""
import base64
import json
import sys
from datetime import datetime, timezone

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def webhook(case):
    headers = {"webhook-id": case["id"], "webhook-timestamp": case["timestamp"], "webhook-signature": case["signature"]}
    hook = Webhook(case["secret"])
    try:
        hook.verify(case["body"], headers)
        verified = True
    except WebhookVerificationError:
        verified = False
    at = datetime.fromtimestamp(int(case["timestamp"]), tz=timezone.utc)
    return {"verified": verified, "signature": hook.sign(case["id"], at, case["body"])}


def push(case):
    key = ec.derive_private_key(int.from_bytes(b64url(case["ua_private"]), "big"), ec.SECP256R1())
    try:
        plaintext = http_ece.decrypt(b64url(case["body"]), private_key=key, auth_secret=b64url(case["auth"]), version="aes128gcm")
        return {"plaintext": base64.b64encode(plaintext).decode()}
    except Exception as error:  # http_ece raises its own and cryptography's errors alike
        return {"error": type(error).__name__}


def vapid(case):
    scheme, params = case["authorization"].split(" ", 1)
    fields = dict(part.strip().split("=", 1) for part in params.split(","))
    header, claims, signature = fields["t"].split(".")
    raw = b64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url(fields["k"]))
    try:
        public.verify(der, f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
        verified = True
    except InvalidSignature:
        verified = False
    return {
        "scheme": scheme,
        "k": fields["k"],
        "verified": verified,
        "header": json.loads(b64url(header)),
        "claims": json.loads(b64url(claims)),
    }


cases = json.load(sys.stdin)
json.dump(
    {
        "webhooks": [webhook(c) for c in cases["webhooks"]],
        "pushes": [push(c) for c in cases["pushes"]],
        "vapid": [vapid(c) for c in cases["vapid"]],
    },
    sys.stdout,
)
