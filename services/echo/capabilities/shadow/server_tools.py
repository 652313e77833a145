"""ECHO's own tools, run inside the pipe (server-side) when Gemini calls them.

Open WebUI runs the tools it declares itself; the tools registered here are declared to Gemini by
the pipe beside them (unless Open WebUI already declares one of the same name: then Open WebUI runs
it) and run by the pipe in a bounded loop, each call and result journaled in the rich shadow.

Registering a tool::

    tools.register(
        name="search_memories",
        description="…what the model reads to decide when to call it…",
        parameters={"type": "object", "properties": {...}, "required": [...]},   # JSON schema
        run=search,   # async (user_id, arguments, backends) -> JSON-able result
    )

``run`` gets the calling user's id, the arguments Gemini wrote (a dict, checked against nothing but
what ``run`` checks itself) and the request's backends (``echo.entrypoints.http.memories.backends_of``: store,
embedder, vectors; None when the service runs without them). It returns what JSON can carry; a dict
is sent to Gemini as the function response, anything else as ``{"result": value}``. It raises
``ToolFailed`` (or any ``EchoError``) for a failure the model should be told about: the response is
then ``{"error": message}``; the chat goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from echo.capabilities.context import search as context_search
from echo.capabilities.memory import search as memory_search
from echo.errors import EchoError

__all__ = ["RunTool", "ServerTool", "ServerTools", "ToolFailed", "builtin_server_tools"]

RunTool = Callable[[str, Mapping[str, Any], Any], Awaitable[Any]]
"""``async run(user_id, arguments, backends) -> JSON-able result``."""


class ToolFailed(EchoError):
    """A server-side tool could not answer; the model gets ``{"error": str(error)}``."""


@dataclass(frozen=True)
class ServerTool:
    """One tool: its declaration (name, description, JSON-schema parameters) and how to run it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: RunTool = field(repr=False)
    needs_backends: bool = True

    def declaration(self) -> dict[str, Any]:
        """The Gemini function declaration (``echo.domain.openai_to_gemini.FunctionDeclarationDict``)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters_json_schema": dict(self.parameters),
        }

    async def call(self, user_id: str, arguments: Mapping[str, Any], backends: Any) -> dict[str, Any]:
        """Run the tool; its result as a function response object (errors included, never raised)."""
        try:
            result = await self.run(user_id, arguments, backends)
        except (EchoError, ValueError, TypeError, KeyError) as error:
            return {"error": str(error) or type(error).__name__}
        return dict(result) if isinstance(result, Mapping) else {"result": result}


class ServerTools:
    """The server-side tools by name, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, ServerTool] = {}

    def register(
        self,
        *,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        run: RunTool,
        needs_backends: bool = True,
    ) -> ServerTool:
        if not name or name in self._tools:
            raise ValueError(f"a server tool named {name!r} is already registered (or the name is empty)")
        tool = ServerTool(name, description, parameters, run, needs_backends)
        self._tools[name] = tool
        return tool

    def get(self, name: str) -> ServerTool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[ServerTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


async def _search_memories(user_id: str, arguments: Mapping[str, Any], backends: Any) -> dict[str, Any]:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolFailed("query: expected a non-empty string")
    k = arguments.get("k", 5)
    k = k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 20 else 5
    if backends is None:
        raise ToolFailed("no store: ECHO runs without its memory backends")
    found = await memory_search.search_memories(backends, user_id, query[:20000], k)
    keys = ("summary", "memory_importance", "tags", "updated_at", "score")
    return {"memories": [{key: item[key] for key in keys} for item in found]}


SEARCH_MEMORIES_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "What to look for in what you remember about the user (a question or keywords).",
        },
        "k": {"type": "integer", "description": "How many memories to return (1-20, default 5)."},
    },
    "required": ["query"],
}


def builtin_server_tools() -> ServerTools:
    """The tools the pipe runs itself: ``search_memories`` (the user's long-term memories) and
    ``search_session_context`` (the passages of a file of this chat, `echo.capabilities.context.search`)."""
    tools = ServerTools()
    tools.register(
        name="search_memories",
        description="Search what you remember about the user: long-term memories distilled from earlier "
        "conversations with this user, nearest to the query first. Use it when the user refers to something "
        "they told you before.",
        parameters=SEARCH_MEMORIES_PARAMETERS,
        run=_search_memories,
    )
    tools.register(
        name="search_session_context",
        description="Search a file attached to this conversation: the passages nearest to the query, best "
        "first. Its source_id is in the file's <smart_context> block; use it to answer from a large file "
        "whose summary is not enough.",
        parameters=context_search.PARAMETERS,
        run=context_search.run_tool,
    )
    return tools
