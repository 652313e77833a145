"""ECHO's server-side tools (`echo.capabilities.shadow.server_tools`): registration, declarations, errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from echo.capabilities.memory import search as memory_search
from echo.capabilities.shadow import server_tools


async def echo_back(user_id: str, arguments: Mapping[str, Any], backends: Any) -> Any:
    if arguments.get("fail") == "tool":
        raise server_tools.ToolFailed("no such thing")
    if arguments.get("fail") == "http":
        raise memory_search.BackendsNotReady("the embedder is not ready")
    return {"user": user_id, **arguments} if arguments.get("as_dict") else [user_id]


def test_tools_register_once_and_declare_their_schema() -> None:
    tools = server_tools.ServerTools()
    tool = tools.register(name="echo_back", description="Echo.", parameters={"type": "object"}, run=echo_back)
    assert tools.get("echo_back") is tool
    assert [t.name for t in tools] == ["echo_back"]
    assert len(tools) == 1
    assert tool.declaration() == {
        "name": "echo_back",
        "description": "Echo.",
        "parameters_json_schema": {"type": "object"},
    }
    with pytest.raises(ValueError, match="already registered"):
        tools.register(name="echo_back", description="", parameters={}, run=echo_back)


async def test_a_call_answers_a_response_object_and_never_raises() -> None:
    tool = server_tools.ServerTool("t", "", {}, echo_back)
    assert await tool.call("u", {"as_dict": True}, None) == {"user": "u", "as_dict": True}
    assert await tool.call("u", {}, None) == {"result": ["u"]}
    assert await tool.call("u", {"fail": "tool"}, None) == {"error": "no such thing"}
    assert await tool.call("u", {"fail": "http"}, None) == {"error": "the embedder is not ready"}


async def test_search_memories_checks_its_arguments_and_needs_backends() -> None:
    tool = server_tools.builtin_server_tools().get("search_memories")
    assert tool is not None
    assert tool.declaration()["parameters_json_schema"]["required"] == ["query"]
    assert await tool.call("u", {"query": ""}, None) == {"error": "query: expected a non-empty string"}
    assert "without its memory backends" in (await tool.call("u", {"query": "dog"}, None))["error"]
