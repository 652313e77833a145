"""Serve the fake Gemini API (tests/fakes/gemini_server.py) on 0.0.0.0:$PORT for the kind e2e suite.

The fake's own `start()` binds 127.0.0.1 on a random port (it is made for in-process tests); in a
pod it must listen on every interface at a fixed port, so its ASGI app is served directly. Both
files are mounted side by side from a ConfigMap, so `gemini_server` imports from this folder.
"""

from __future__ import annotations

import os

import uvicorn
from gemini_server import FakeGemini


def main() -> None:
    fake = FakeGemini(embed_dim=int(os.environ.get("EMBED_DIM", "768")))
    uvicorn.run(fake._app, host="0.0.0.0", port=int(os.environ.get("PORT", "8080")), log_level="info")


if __name__ == "__main__":
    main()
