"""Open WebUI's own REST API, as an adapter (httpx): what ECHO reads from Open WebUI directly.

Configured by `ECHO_OPENWEBUI_URL` and `ECHO_OPENWEBUI_API_KEY` (an admin API key, `sk-…`; Open WebUI
needs `ENABLE_API_KEYS=true`). Used for referenced chats that ECHO has not seen (their transcript),
`client.OpenWebUI.chat`; `history.active_branch` turns a stored chat into the message list of its
active branch, pure. Errors surface as `client.OpenWebUIError` (``retryable`` says whether a later
call may succeed); a chat that does not exist or is not readable is None, not an error.
`admin.OpenWebUIAdmin` is the admin API `echoctl openwebui connect` uses (Functions, tool servers,
model and chat configuration), its errors `admin.AdminError` / `admin.AdminKeyRefused`.
The package imports none of the modules, so the pure `history` never drags httpx in.
"""

__all__: list[str] = []  # import the modules: `client`, `admin` (httpx) or `history` (pure), not this package
