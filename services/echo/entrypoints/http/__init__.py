"""echo-hooks: the FastAPI app serving the Open WebUI Pipelines protocol (DESIGN §3).

Thin adapters over the filters: parse and check the request, run the filter under its deadline,
answer. Client mistakes get a 4xx naming the field; a failing filter never fails the chat.
"""

from echo.entrypoints.http.app import create_app

__all__ = ["create_app"]
