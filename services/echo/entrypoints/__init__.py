"""Entry points: where a process starts, reads its environment and wires the layers together.

- `http`: the echo-hooks FastAPI app (Open WebUI's Pipelines protocol, the tool server, the memory
  API, operational routes) and the edge every request meets,
- `cli`: `echoctl`, the one command line (the environment is read there and nowhere else),
- `runtime`: the hook service's connections (store, embedder, vectors, embedded worker),
- `worker`: `echoctl worker`, the distiller process,
- `replay`: `echoctl replay`, a recorded conversation played through the filters,
- `openwebui_connect`: `echoctl openwebui connect`, ECHO installed in Open WebUI through its admin API
  (the Function it installs: `openwebui_function/echo_filter_function.py`, package data).
"""
