"""Store errors: every driver error leaves the store translated into one of these.

EchoError
└── StoreError                 (the store port's root, ``echo.ports.store``) something went wrong talking to
    │                          PostgreSQL; ``retryable`` says if a retry helps
    ├── TransientStoreError    retryable, after a delay: connection lost or refused, server shutting down,
    │                          serialization failure, deadlock, lock or statement timeout, too many clients
    └── PermanentStoreError    retrying the same call fails the same way; fix the input, the schema or
        │                      the configuration first
        ├── ConstraintViolation   a unique, foreign-key, check or not-null constraint refused the write
        ├── DataRefused           a value was refused: one PostgreSQL cannot hold or parse (SQLSTATE
        │                         class 22) or one the driver cannot encode for its parameter's type
        ├── MigrationError        a migration file is malformed, was edited after being applied, or failed
        └── EmbeddedPostgresError the embedded PostgreSQL could not be started (or its wheel is missing)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from echo.ports import store as store_port

__all__ = [
    "ConstraintViolation",
    "DataRefused",
    "EmbeddedPostgresError",
    "MigrationError",
    "PermanentStoreError",
    "StoreError",
    "TransientStoreError",
    "describe",
    "translate_errors",
]


StoreError = store_port.StoreError
"""Root of the store errors, the store port's (``echo.ports.store.StoreError``): ``retryable`` tells
whether the same call may succeed later (true for `TransientStoreError`, false for the rest), and
``sqlstate`` is PostgreSQL's code when the server answered one."""


class TransientStoreError(StoreError):
    """Retry after a delay: the server or the network is the problem, not the request."""

    retryable = True


class PermanentStoreError(StoreError):
    """Retrying the same call fails the same way."""


class ConstraintViolation(PermanentStoreError):
    """A constraint of the schema refused the write (SQLSTATE class 23)."""

    refused = "the write"


class DataRefused(PermanentStoreError):
    """A value of the statement was refused (SQLSTATE class 22, data exception, or a parameter the
    driver cannot encode): the store works, this data does not fit. Text is made storable before it
    is sent (``echo.domain.text``), so this names a bug or a value of another kind (a NaN in JSON, a number
    out of range), never a store that is down."""

    refused = "a value"


class MigrationError(PermanentStoreError):
    """A migration is malformed, was changed after being applied, or failed to apply."""


class EmbeddedPostgresError(PermanentStoreError):
    """The embedded PostgreSQL could not be started."""


# SQLSTATE classes and codes after which the same statement may succeed if retried later.
_TRANSIENT_CLASSES = ("08", "53", "57P", "58")  # connection, resources, operator intervention, system
_TRANSIENT_CODES = frozenset({"40001", "40P01", "55P03", "57014"})  # serialization, deadlock, lock, timeout


def is_transient_sqlstate(sqlstate: str | None) -> bool:
    """Whether an error with this SQLSTATE is worth retrying after a delay."""
    if not sqlstate:
        return False
    return sqlstate in _TRANSIENT_CODES or sqlstate.startswith(_TRANSIENT_CLASSES)


def translate(error: BaseException) -> StoreError:
    """The store error for a driver (asyncpg) or network error."""
    import asyncpg

    if isinstance(error, StoreError):
        return error
    if isinstance(error, asyncpg.PostgresError):
        sqlstate = getattr(error, "sqlstate", None)
        detail = getattr(error, "detail", None)
        message = f"{type(error).__name__}: {error}" + (f" ({detail})" if detail else "")
        if is_transient_sqlstate(sqlstate):
            return TransientStoreError(message, sqlstate=sqlstate)
        if sqlstate and sqlstate.startswith("23"):
            return ConstraintViolation(message, sqlstate=sqlstate)
        if sqlstate and sqlstate.startswith("22"):
            return DataRefused(message, sqlstate=sqlstate)
        return PermanentStoreError(message, sqlstate=sqlstate)
    if isinstance(error, asyncpg.DataError):
        # Raised before anything is sent: a parameter the codec of its type cannot encode.
        return DataRefused(f"{type(error).__name__}: {error}")
    if isinstance(error, OSError | TimeoutError):
        # Refused or lost connections, DNS failures, timeouts.
        return TransientStoreError(f"{type(error).__name__}: {error}")
    # asyncpg.InterfaceError: misuse (wrong arguments, bad parameter data, closed pool): a bug to fix.
    return PermanentStoreError(f"{type(error).__name__}: {error}")


describe = store_port.describe
"""What a status line says of a store error (``echo.ports.store.describe``)."""


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise driver and network errors as store errors (the original is chained as the cause)."""
    try:
        yield
    except StoreError:
        raise
    except (TimeoutError, OSError) as error:
        raise translate(error) from error
    except Exception as error:
        import asyncpg

        if isinstance(error, asyncpg.PostgresError | asyncpg.InterfaceError):
            raise translate(error) from error
        raise
