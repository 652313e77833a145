"""Text embeddings behind one port, ``Embedder``, with three adapters.

- ``HttpEmbedder``: an Infinity / OpenAI-style ``{base}/embeddings`` server (production: bge-m3);
- ``LocalEmbedder``: sentence-transformers on a model directory, in-process (embedded mode);
- ``FakeEmbedder``: deterministic hash vectors, no I/O (domain tests).

Rules of the package: every vector an adapter returns is L2-normalised; the dimension always comes
from the backend (the model, or the server's first answer), never from configuration; every failure
of a backend surfaces as ``EmbeddingError``, whose ``retryable`` says whether trying again may help.
``embedder_from_settings`` picks the adapter: HTTP when ``ECHO_EMBEDDING_URL`` is set, else local.
"""

from __future__ import annotations

from echo.adapters.embeddings.factory import PACKAGED_MODEL_NAME, embedder_from_settings, packaged_model_path
from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.embeddings.http import HttpEmbedder
from echo.adapters.embeddings.local import LocalEmbedder
from echo.ports.embeddings import Embedder, EmbeddingError, l2_normalise

__all__ = [
    "PACKAGED_MODEL_NAME",
    "Embedder",
    "EmbeddingError",
    "FakeEmbedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "embedder_from_settings",
    "l2_normalise",
    "packaged_model_path",
]
