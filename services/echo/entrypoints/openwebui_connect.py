"""`echoctl openwebui connect`: install ECHO in Open WebUI through its own API; say what is missing.

Three steps, the middle one pure:

1. `observe` reads what Open WebUI has (`adapters.openwebui.admin`): its version, its Functions, its
   tool servers, the default and per-model params, the chat and memory configuration;
2. `plan(target, observed)` compares it with what ECHO needs and returns the `Step`s to take and the
   check lines — the Function `echo` (a filter, active, global) with ECHO's source and the valves
   `ECHO_URL`, `ECHO_API_KEY` (the others keep their values); ECHO's tool server in
   `TOOL_SERVER_CONNECTIONS` (shared with every user unless it already has grants of its own; an
   admin's `function_name_filter_list` on it is kept, less what would hide the user's memory
   operations `MEMORY_OPERATIONS`: Open WebUI drops every operation an allow list does not name or a
   `!name` blocks);
   native function calling; Open WebUI's own context compaction and memory review (a warning: both
   do what ECHO does; turning one off is the user's choice); `ENABLE_FORWARD_USER_INFO_HEADERS`,
   which no endpoint shows (an environment variable of Open WebUI's process): "cannot check";
3. `connect` takes the steps (none with ``dry_run``), asks Open WebUI to verify the tool server (it
   fetches ECHO's OpenAPI document itself, so this proves the URL works from Open WebUI's side), and
   `report` turns it all into one line per thing done, unchanged or missing, and the exit code.

A second run finds nothing to change (every step is taken only when its state differs). The
Function's source is the file `openwebui_function/echo_filter_function.py` of this package, read by
`function_source` (package data, so an installed echoctl has it; `integrations/openwebui/` holds the
same file for pasting by hand, and a test keeps the two identical).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from echo.adapters.openwebui import admin as owui

__all__ = [
    "EXIT_FAILED",
    "EXIT_MISSING",
    "EXIT_OK",
    "Line",
    "Observed",
    "Plan",
    "Report",
    "Step",
    "Target",
    "connect",
    "function_source",
    "observe",
    "plan",
    "report",
]

FUNCTION_ID = "echo"
FUNCTION_NAME = "ECHO"
TOOL_SERVER_ID = "echo"
TOOLS_PATH = "tools/openapi.json"
# Open WebUI's grant for "every user may read" (utils/access_control: has_access); with no grant at
# all a tool server is the admins' only.
EVERY_USER = ({"principal_type": "user", "principal_id": "*", "permission": "read"},)
# The tool server's operations a user needs to see and remove what ECHO remembers about them: connect
# keeps them out of reach of an admin's operation filter (`config.function_name_filter_list`).
MEMORY_OPERATIONS = ("search_memories", "list_memories", "forget_memory", "forget_all_memories")
CHECKED_AGAINST = "0.12."  # the Open WebUI series whose API this was written and tested against

EXIT_OK, EXIT_MISSING, EXIT_FAILED = 0, 1, 3  # (2: click's usage errors)

Status = Literal["changed", "would change", "unchanged", "ok", "missing", "warning", "cannot check", "failed"]
Action = Literal[
    "create_function", "update_function", "set_valves", "activate", "make_global", "set_tool_servers"
]


def function_source() -> str:
    """The Function's source, as shipped in this package."""
    path = resources.files("echo.entrypoints").joinpath("openwebui_function", "echo_filter_function.py")
    return path.read_text(encoding="utf-8")


def frontmatter(source: str) -> dict[str, str]:
    """The `key: value` lines of the docstring that opens a Function (Open WebUI reads the same)."""
    head = re.match(r'\s*"""(.*?)"""', source, re.DOTALL)
    pairs = (line.split(":", 1) for line in (head.group(1) if head else "").splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass(frozen=True)
class Target:
    """What ECHO should look like in Open WebUI: ECHO's URL and key as Open WebUI uses them."""

    echo_url: str
    echo_key: str | None
    source: str

    @property
    def valves(self) -> dict[str, Any]:
        return {"ECHO_URL": self.echo_url, "ECHO_API_KEY": self.echo_key or ""}

    @property
    def tools_url(self) -> str:
        return f"{self.echo_url.rstrip('/')}/{TOOLS_PATH}"


@dataclass(frozen=True)
class Observed:
    """What Open WebUI has; None where it does not serve the call (the check then says so)."""

    version: str | None
    functions: list[dict[str, Any]]
    tool_servers: list[dict[str, Any]]
    url: str = ""
    default_params: dict[str, Any] | None = None
    models: list[dict[str, Any]] | None = None
    chat_config: dict[str, Any] | None = None
    memories: dict[str, Any] | None = None


@dataclass(frozen=True)
class Step:
    action: Action
    text: str  # what changes, never a key's value
    payload: Any = None


@dataclass(frozen=True)
class Line:
    status: Status
    text: str

    def render(self) -> str:
        return f"{self.status:<13} {self.text}"


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    unchanged: tuple[Line, ...]
    checks: tuple[Line, ...]
    tool_server: dict[str, Any]  # the connection Open WebUI is asked to verify


@dataclass(frozen=True)
class Report:
    lines: tuple[Line, ...]
    exit_code: int
    changes: int = 0  # steps taken (0 with dry_run)


def plan(target: Target, observed: Observed) -> Plan:
    """The steps that bring Open WebUI to `target`, and the checks of what connect does not change."""
    steps: list[Step] = []
    unchanged: list[Line] = []
    _function_steps(target, observed.functions, steps, unchanged)
    connections, connection, line = _tool_server(target, observed.tool_servers)
    if line is None:
        unchanged.append(Line("unchanged", f"tool server {TOOL_SERVER_ID} at {target.tools_url}"))
    else:
        steps.append(Step("set_tool_servers", line, connections))
    return Plan(tuple(steps), tuple(unchanged), tuple(_checks(target, observed)), connection)


def _function_steps(
    target: Target, functions: list[dict[str, Any]], steps: list[Step], unchanged: list[Line]
) -> None:
    meta = frontmatter(target.source)
    description, version = meta.get("description", "ECHO's hooks"), meta.get("version", "?")
    name = f"Function {FUNCTION_ID}"
    form = {"name": FUNCTION_NAME, "content": target.source, "description": description}
    before = len(steps)
    found = next((f for f in functions if f.get("id") == FUNCTION_ID), None)
    if found is None:
        steps.append(Step("create_function", f"{name}: new, version {version}", form))
        found = {}
    elif (
        found.get("content") != target.source
        or found.get("name") != FUNCTION_NAME
        or (found.get("meta") or {}).get("description") != description
    ):
        was = frontmatter(str(found.get("content") or "")).get("version", "?")
        steps.append(Step("update_function", f"{name}: content, version {was} → {version}", form))
    stored = found.get("valves") or {}
    valves = {**stored, **target.valves}
    differ = [key for key, value in target.valves.items() if stored.get(key) != value]
    if differ:
        shown = ", ".join(
            f"{k}={v}" if k == "ECHO_URL" else k for k, v in target.valves.items() if k in differ
        )
        steps.append(Step("set_valves", f"{name}: valves {shown}", valves))
    if not found.get("is_active"):
        steps.append(Step("activate", f"{name}: active"))
    if not found.get("is_global"):
        steps.append(Step("make_global", f"{name}: global (a filter on every model)"))
    if found and len(steps) == before:
        unchanged.append(Line("unchanged", f"{name}: version {version}, valves, active, global"))


def _tool_server(
    target: Target, existing: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """The whole new `TOOL_SERVER_CONNECTIONS`, ECHO's entry in it, and what changed (None: nothing).
    ECHO's entry is the one whose `info.id` is `echo`, else one at ECHO's URL and path; the other
    entries, and fields connect does not own, are kept as they are."""

    def ours(entry: dict[str, Any]) -> bool:
        return (entry.get("info") or {}).get("id") == TOOL_SERVER_ID

    def same_place(entry: dict[str, Any]) -> bool:
        url, path = str(entry.get("url") or "").rstrip("/"), str(entry.get("path") or "").lstrip("/")
        return url == target.echo_url.rstrip("/") and path == TOOLS_PATH

    index = next((i for i, e in enumerate(existing) if ours(e)), None)
    if index is None:
        index = next((i for i, e in enumerate(existing) if same_place(e)), None)
    old = existing[index] if index is not None else {}
    config, info = dict(old.get("config") or {}), dict(old.get("info") or {})
    shared = not config.get("access_grants")
    filtered = "function_name_filter_list" in config
    if filtered:
        config["function_name_filter_list"] = _memory_operations_allowed(config["function_name_filter_list"])
    entry = {
        **old,
        "url": target.echo_url.rstrip("/"),
        "path": TOOLS_PATH,
        "type": "openapi",
        "auth_type": "bearer" if target.echo_key else "none",
        "key": target.echo_key or "",
        "config": {
            **config,
            "enable": True,
            "access_grants": list(config.get("access_grants") or EVERY_USER),
        },
        "info": {
            **info,
            "id": TOOL_SERVER_ID,
            "name": info.get("name") or FUNCTION_NAME,
            "description": info.get("description") or "ECHO: your memories, the chat's files, plans and code",
        },
    }
    connections = list(existing)
    if index is None:
        connections.append(entry)
        text = f"tool server {TOOL_SERVER_ID}: new at {target.tools_url}, every user may use it"
        return connections, entry, text
    connections[index] = entry
    if entry == old:
        return connections, entry, None
    differ = [k for k in ("url", "path", "type", "auth_type", "key") if old.get(k) != entry[k]]
    differ += ["enabled"] if not config.get("enable") else []
    differ += ["shared with every user"] if shared else []
    hidden = (
        filtered
        and (old.get("config") or {}).get("function_name_filter_list") != config["function_name_filter_list"]
    )
    differ += ["memory operations let through its operation filter"] if hidden else []
    differ += [f"id {TOOL_SERVER_ID}"] if (old.get("info") or {}).get("id") != TOOL_SERVER_ID else []
    return connections, entry, f"tool server {TOOL_SERVER_ID}: {', '.join(differ) or 'details'}"


def _memory_operations_allowed(filter_list: Any) -> Any:
    """An operation filter as Open WebUI reads it (utils/misc.py `is_string_allowed`: a comma-separated
    text or a list; an entry matches every name that ends with it, `!entry` blocks those, and plain
    entries make an allow list), that lets `MEMORY_OPERATIONS` through: the blocks that match one are
    removed, and the ones an allow list misses are added to it. The same value when it already does."""
    entries = filter_list.split(",") if isinstance(filter_list, str) else list(filter_list or [])
    names = [str(entry).strip() for entry in entries if str(entry).strip()]

    def blocks_one(entry: str) -> bool:
        blocked = entry[1:].strip()
        return entry.startswith("!") and any(op.endswith(blocked) for op in MEMORY_OPERATIONS if blocked)

    kept = [n for n in names if not blocks_one(n)]
    allowed = [n for n in kept if not n.startswith("!")]
    if allowed:
        kept += [op for op in MEMORY_OPERATIONS if not any(op.endswith(a) for a in allowed)]
    if kept == names:
        return filter_list
    return ",".join(kept) if isinstance(filter_list, str) else kept


def _checks(target: Target, observed: Observed) -> list[Line]:
    lines: list[Line] = []
    if observed.version is None:
        lines.append(Line("warning", "Open WebUI did not say its version (connect knows 0.12)"))
    elif not observed.version.startswith(CHECKED_AGAINST):
        lines.append(Line("warning", f"Open WebUI {observed.version}: connect knows the API of 0.12"))
    if not target.echo_key:
        lines.append(
            Line(
                "warning",
                "no ECHO key (--echo-key, ECHO_API_KEY): the Function and the tool server send none, "
                "which only a keyless ECHO (ECHO_ALLOW_UNAUTHENTICATED=true) accepts",
            )
        )
    twins = [
        str(f.get("id"))
        for f in observed.functions
        if f.get("id") != FUNCTION_ID
        and (f.get("content") == target.source or f.get("name") == FUNCTION_NAME)
    ]
    if twins:
        lines.append(
            Line(
                "warning",
                f"other Functions look like ECHO's ({', '.join(twins)}): with two active, hooks run twice",
            )
        )
    lines.append(_function_calling(observed))
    lines.append(
        Line(
            "cannot check",
            "ENABLE_FORWARD_USER_INFO_HEADERS: not in Open WebUI's API (an environment variable of its "
            "process); Open WebUI must run with it true, or ECHO's tools refuse every call (no user id)",
        )
    )
    lines.append(_compaction(observed.chat_config))
    lines.append(_memory_review(observed.memories))
    return lines


def _function_calling(observed: Observed) -> Line:
    if observed.default_params is None or observed.models is None:
        return Line("cannot check", "native function calling: Open WebUI does not serve its model params")
    default = observed.default_params.get("function_calling") or "native"
    legacy = sorted(
        str(m.get("id"))
        for m in observed.models
        if ((m.get("params") or {}).get("function_calling") or default) != "native"
    )
    if default != "native":
        return Line(
            "missing",
            f"native function calling: the default model params say function_calling={default} "
            "(Admin Panel → Settings → Models); ECHO's tools and shadow need native",
        )
    if legacy:
        return Line(
            "missing",
            f"native function calling: models {', '.join(legacy)} set another mode (their advanced params)",
        )
    return Line("ok", "native function calling: the default, and no model sets another mode")


def _compaction(chat_config: dict[str, Any] | None) -> Line:
    if chat_config is None or "ENABLE_CONTEXT_COMPACTION" not in chat_config:
        return Line("cannot check", "Open WebUI's own context compaction (ENABLE_CONTEXT_COMPACTION)")
    if chat_config["ENABLE_CONTEXT_COMPACTION"]:
        return Line(
            "warning",
            "Open WebUI's own context compaction is on (ENABLE_CONTEXT_COMPACTION), for every model: it "
            "and ECHO's compression both shorten the same chats; keep one (your choice)",
        )
    return Line("ok", "Open WebUI's own context compaction is off")


def _memory_review(memories: dict[str, Any] | None) -> Line:
    key = "memories.background_review.enable"
    if memories is None or key not in memories:
        return Line("cannot check", "Open WebUI's memory background review (ENABLE_MEMORY_BACKGROUND_REVIEW)")
    if memories[key] and memories.get("memories.enable"):
        return Line(
            "warning",
            "Open WebUI's memory background review is on (ENABLE_MEMORY_BACKGROUND_REVIEW): it and ECHO's "
            "memory both keep facts about the user; keep one (your choice)",
        )
    return Line("ok", "Open WebUI's memory background review is off")


def verified(target: Target, verification: owui.Verification) -> Line:
    if verification.ok:
        count = sum(1 for path in verification.paths if path.startswith("/tools/"))
        return Line("ok", f"Open WebUI reads ECHO's tool server at {target.tools_url} ({count} tools)")
    return Line(
        "missing",
        f"Open WebUI cannot read ECHO's tool server at {target.tools_url} ({verification.detail}): "
        "is --echo-url ECHO's URL as Open WebUI reaches it?",
    )


def report(
    the_plan: Plan,
    *,
    observed: Observed,
    dry_run: bool,
    done: int,
    verification: Line | None = None,
    failure: str | None = None,
) -> Report:
    """One line per thing changed (or to change), unchanged, checked; the exit code: 0 all set, 1
    something missing (or, with ``dry_run``, something to change), 3 a call failed."""
    lines = [Line("ok", f"Open WebUI {observed.version} at {observed.url}")] if observed.version else []
    taken = the_plan.steps if dry_run else the_plan.steps[:done]
    lines += [Line("would change" if dry_run else "changed", step.text) for step in taken]
    if failure is not None:
        lines.append(Line("failed", failure))
        return Report(tuple(lines), EXIT_FAILED, done)
    lines += the_plan.unchanged
    lines += the_plan.checks
    if verification is not None:
        lines.append(verification)
    missing = sum(1 for line in lines if line.status == "missing")
    pending = len(the_plan.steps) if dry_run else 0
    summary = (
        f"dry run: {pending} change{'s' * (pending != 1)} to make, nothing changed"
        if dry_run
        else f"{done} change{'s' * (done != 1)}"
        if done
        else "nothing to change"
    )
    status: Status = "missing" if missing else "would change" if pending else "ok"
    lines.append(Line(status, f"{summary}; {missing} missing" if missing else summary))
    code = EXIT_MISSING if missing or pending else EXIT_OK
    return Report(tuple(lines), code, 0 if dry_run else done)


async def observe(admin: owui.OpenWebUIAdmin) -> Observed:
    version = await admin.version()  # public: says whether Open WebUI is there at all
    return Observed(
        version=version,
        url=admin.base_url,
        functions=await admin.functions(),  # the first admin call: says whether the key is one
        tool_servers=await admin.tool_servers(),
        default_params=await admin.default_model_params(),
        models=await admin.models(),
        chat_config=await admin.chat_config(),
        memories=await admin.config_namespace("memories"),
    )


async def _take(admin: owui.OpenWebUIAdmin, step: Step) -> None:
    if step.action in ("create_function", "update_function"):
        form = step.payload
        call = admin.create_function if step.action == "create_function" else admin.update_function
        made = await call(FUNCTION_ID, form["name"], form["content"], form["description"])
        if made.get("type") not in (None, "filter"):
            raise owui.AdminError(
                f"Open WebUI read the Function {FUNCTION_ID} as a {made['type']}, not a filter"
            )
    elif step.action == "set_valves":
        await admin.set_function_valves(FUNCTION_ID, step.payload)
    elif step.action == "activate":
        if not (await admin.toggle_function(FUNCTION_ID)).get("is_active"):
            raise owui.AdminError(f"Open WebUI left the Function {FUNCTION_ID} inactive")
    elif step.action == "make_global":
        if not (await admin.toggle_function_global(FUNCTION_ID)).get("is_global"):
            raise owui.AdminError(f"Open WebUI left the Function {FUNCTION_ID} not global")
    else:
        await admin.set_tool_servers(step.payload)


async def connect(admin: owui.OpenWebUIAdmin, target: Target, *, dry_run: bool) -> Report:
    """Observe, plan, take the steps (not with ``dry_run``), verify the tool server, report."""
    try:
        observed = await observe(admin)
    except owui.AdminError as error:
        empty = Plan((), (), (), {})
        return report(empty, observed=Observed(None, [], []), dry_run=dry_run, done=0, failure=str(error))
    the_plan = plan(target, observed)
    done = 0
    try:
        if not dry_run:
            for step in the_plan.steps:
                await _take(admin, step)
                done += 1
        verification = verified(target, await admin.verify_tool_server(the_plan.tool_server))
    except owui.AdminError as error:
        return report(the_plan, observed=observed, dry_run=dry_run, done=done, failure=str(error))
    return report(the_plan, observed=observed, dry_run=dry_run, done=done, verification=verification)
