"""Named SQL queries: `.sql` files split into `-- name: xxx` blocks, loaded once per file.

    -- name: claim_job
    -- Take the oldest ready job (comment lines after the name are its description).
    UPDATE jobs SET ...;

A block runs from its `-- name:` line to the next one. Names are unique per file. Identifiers that
cannot be bind parameters (a schema name) are written `{schema}` and filled in with `Query.format`,
which only accepts safe identifiers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

from echo.config import tenancy

__all__ = ["Query", "load", "parse"]

_NAME = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    """One named SQL statement and the file it came from."""

    name: str
    sql: str
    description: str = ""
    source: str = ""

    def format(self, **identifiers: str) -> Query:
        """This query with `{key}` placeholders replaced by double-quoted safe identifiers."""
        quoted = {key: tenancy.quote_identifier(value) for key, value in identifiers.items()}
        return Query(self.name, self.sql.format(**quoted), self.description, self.source)


def parse(text: str, *, source: str = "<string>") -> Mapping[str, Query]:
    """The named queries of one `.sql` text; anything before the first name is a file comment."""
    matches = list(_NAME.finditer(text))
    if not matches:
        raise ValueError(f"{source}: no `-- name: xxx` block")
    queries: dict[str, Query] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip("\n")
        description_lines: list[str] = []
        sql_lines: list[str] = []
        for line in body.splitlines():
            if not sql_lines and line.startswith("--"):
                description_lines.append(line.lstrip("-").strip())
            else:
                sql_lines.append(line)
        name = match["name"]
        sql = "\n".join(sql_lines).strip()
        if name in queries:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        if not sql:
            raise ValueError(f"{source}: query {name!r} has no SQL")
        queries[name] = Query(name, sql, " ".join(description_lines), source)
    return MappingProxyType(queries)


@cache
def load(package: str, resource: str) -> Mapping[str, Query]:
    """The named queries of a `.sql` file shipped inside a package (read once per process)."""
    text = resources.files(package).joinpath(resource).read_text(encoding="utf-8")
    return parse(text, source=f"{package}/{resource}")
