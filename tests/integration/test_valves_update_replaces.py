"""`valves/update` replaces a filter's valves, it does not merge: the answer and the OpenAPI say so."""

from __future__ import annotations

import httpx


def test_a_valve_left_out_of_an_update_is_reset_to_its_default(client: httpx.Client) -> None:
    assert client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 8, "WINDOW_OVERLAP": 3}).is_success
    answer = client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 9})
    assert answer.status_code == 200
    assert (answer.json()["WINDOW_SIZE"], answer.json()["WINDOW_OVERLAP"]) == (9, 2)  # 3 is gone
    assert client.get("/echo_memory/valves").json() == answer.json()  # the answer: the valves in force


def test_the_openapi_says_that_an_update_resets_what_it_leaves_out(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for filter_id in ("echo_context", "echo_compression", "echo_memory"):
        described = paths[f"/{filter_id}/valves/update"]["post"]["description"]
        assert "a replace, not a merge" in described
        assert "left out of the body is reset to its default" in described
        assert "`GET /{id}/valves`" in described
