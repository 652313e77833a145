"""`echoctl`: the one command line of ECHO. The environment is read here and nowhere else."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import ValidationError

import echo
from echo.errors import ConfigError

__all__ = ["main"]


def _settings_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors(include_url=False):
        field = str(item["loc"][0]) if item["loc"] else "?"
        lines.append(f"ECHO_{field.upper()}: {item['msg']} (got {item.get('input')!r})")
    return "invalid environment: " + "; ".join(lines)


def _load_settings(**overrides: object):  # type: ignore[no-untyped-def]
    from echo.config.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        raise click.ClickException(_settings_error(error)) from error


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(echo.__version__, prog_name="echoctl")
def main() -> None:
    """ECHO, a cognitive layer for Open WebUI: compression, memory, attachments, rich shadow.

    Configuration comes from ECHO_* environment variables (see the README) and from the mounted
    files they name (ECHO_VALVES_FILE, ECHO_MODEL_THRESHOLDS_FILE).
    """


@main.command()
@click.option("--host", default=None, help="Bind address (ECHO_HOST, default 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (ECHO_PORT, default 9099).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Embedded state directory (ECHO_DATA_DIR, default ./.echo).",
)
def serve(host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Run echo-hooks: the Pipelines server Open WebUI connects to.

    With nothing configured it runs embedded: state under ./.echo, no auth (logged loudly), no
    Gemini pipe models unless ECHO_GEMINI_API_KEY is set. Point Open WebUI's OpenAI connection at
    http://HOST:PORT with ECHO_API_KEY as its key.
    """
    import uvicorn

    from echo import logs, tracing
    from echo.config.live import LiveConfig
    from echo.hooks import app as hooks_app

    settings = _load_settings(host=host, port=port, data_dir=data_dir)
    logs.configure_logging(settings.log_level, settings.log_format)
    tracing.configure_tracing("echo-hooks", settings.otlp_endpoint)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    config = LiveConfig(settings, on_reload=hooks_app._on_reload)
    try:
        config.load()
    except ConfigError as error:
        raise click.ClickException(f"invalid configuration: {error}") from error
    app = hooks_app.create_app(settings, config=config)
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False)


def _not_in_this_version(command: str, capability: str) -> None:
    raise click.ClickException(
        f"`echoctl {command}` needs {capability}, which this version does not include yet"
    )


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

    Takes jobs from the PostgreSQL queue (FOR UPDATE SKIP LOCKED, leases, retries, dead letters).
    """
    _not_in_this_version("worker", "the job queue")


@main.command()
def operator() -> None:
    """Run the Kubernetes operator (kopf) that reconciles EchoDeployment resources."""
    _not_in_this_version("operator", "the operator package")


@main.command()
def migrate() -> None:
    """Apply the database migrations (safe to run twice, and from two processes at once)."""
    _not_in_this_version("migrate", "the PostgreSQL store")


@main.command()
@click.argument("chat_id")
def replay(chat_id: str) -> None:
    """Print the rich shadow of one chat, turn by turn, with its hash chain."""
    _not_in_this_version("replay", "the rich shadow")


if __name__ == "__main__":  # pragma: no cover - `python -m echo.cli`
    main()
