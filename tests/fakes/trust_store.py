"""A one-certificate trust store for the test process: TLS clients cost a millisecond to make.

Every `httpx.Client`, and each Gemini client three times over, builds an SSL context that loads
certifi's whole bundle (about 40 ms of CPU); the suite builds thousands and never makes a TLS
connection (every server it talks to is plain HTTP on loopback). `SSL_CERT_FILE`, which httpx and
google-genai read, names a file with certifi's first root certificate instead. A trust store set by
the caller (`SSL_CERT_FILE` or `SSL_CERT_DIR` already in the environment) is left alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from pathlib import Path

import certifi

__all__ = ["use_one_certificate"]

_BEGIN, _END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"


def use_one_certificate() -> None:
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return
    bundle = Path(certifi.where()).read_text(encoding="ascii")
    start = bundle.index(_BEGIN)
    first = bundle[start : bundle.index(_END, start) + len(_END)] + "\n"
    handle, name = tempfile.mkstemp(prefix="echo-tests-ca-", suffix=".pem")
    with os.fdopen(handle, "w", encoding="ascii") as file:
        file.write(first)
    os.environ["SSL_CERT_FILE"] = name
    atexit.register(_forget, name)


def _forget(name: str) -> None:
    os.environ.pop("SSL_CERT_FILE", None)
    with contextlib.suppress(OSError):
        os.unlink(name)
