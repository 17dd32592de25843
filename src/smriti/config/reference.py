"""The settings as a person reads them: each value in effect, its section and where it came
from (``smriti config``), and the reference page generated from the code (``docs/settings.md``,
``smriti config --markdown``; a test fails when the checked-in page differs)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from smriti.config.section import Section
from smriti.config.settings import SECTIONS, Settings, env_names

# ``scheme://user:password@host``: the password of a URL is masked like a secret.
_URL_PASSWORD = re.compile(r"(://[^/@:\s]+:)[^/@\s]+@")
MASK = "********"


@dataclass(frozen=True)
class SettingRow:
    """One setting as ``smriti config`` shows it."""

    section: str  # the section's slug
    field: str
    variable: str  # the environment variable that sets it (the preferred one)
    value: str  # as shown: secrets masked
    source: str  # "default", "environment (NAME)" or "argument"
    description: str

    @property
    def is_default(self) -> bool:
        return self.source == "default"


def section_of(slug: str) -> type[Section]:
    """The section class named ``slug``.

    Raises:
        KeyError: no section has that slug.
    """
    for section in SECTIONS:
        if section.slug == slug:
            return section
    raise KeyError(slug)


def fields_of(section: type[Section]) -> dict[str, FieldInfo]:
    """The fields ``section`` declares, in declaration order."""
    return {name: Settings.model_fields[name] for name in section.model_fields}


def shown(value: Any) -> str:
    """A value as an environment variable would spell it, secrets and URL passwords masked."""
    if value is None:
        return "(unset)"
    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else "(empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf"\g<1>{MASK}@", value) if value else "(empty)"
    return str(value)


def _environment_variable(field: str, environ: Mapping[str, str]) -> str | None:
    """The variable in ``environ`` that set ``field`` (names are case-insensitive, as Settings
    reads them; of two spellings the preferred one wins, as pydantic's alias choices do)."""
    present = {name.upper(): name for name in environ}
    for name in env_names(field):
        if name in present:
            return present[name]
    return None


def setting_rows(
    settings: Settings, environ: Mapping[str, str] | None = None, sections: Iterable[type[Section]] = SECTIONS
) -> list[SettingRow]:
    """Each setting of ``sections`` with its value in ``settings`` and where that came from.

    Args:
        settings: the settings in effect (as :func:`~smriti.config.load_settings` read them).
        environ: the environment they were read from (default ``os.environ``).
        sections: which sections, in order.
    """
    environ = os.environ if environ is None else environ
    rows = []
    for section in sections:
        for field, info in fields_of(section).items():
            variable = _environment_variable(field, environ)
            if variable is not None:
                source = f"environment ({variable})"
            elif field in settings.model_fields_set:
                source = "argument"  # Settings(...) or load_settings(...) in library use
            else:
                source = "default"
            rows.append(
                SettingRow(
                    section=section.slug,
                    field=field,
                    variable=env_names(field)[0],
                    value=shown(getattr(settings, field)),
                    source=source,
                    description=info.description or "",
                )
            )
    return rows


# ----------------------------------------------------------------------------- the reference page
def default_text(info: FieldInfo) -> str:
    """The default as the reference shows it (a computed default says what it computes)."""
    extra = info.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("default_text"), str):
        return str(extra["default_text"])
    if isinstance(info.default, Path):
        return str(info.default)
    return shown(info.default)


def allowed_text(info: FieldInfo) -> str:
    """The values a field accepts: its choices, or its bounds."""
    annotation = info.annotation
    if get_origin(annotation) is Literal:
        return ", ".join(str(choice) for choice in get_args(annotation))
    bounds = []
    for item in info.metadata:
        if isinstance(item, Ge):
            bounds.append(f">= {item.ge}")
        elif isinstance(item, Gt):
            bounds.append(f"> {item.gt}")
        elif isinstance(item, Le):
            bounds.append(f"<= {item.le}")
        elif isinstance(item, Lt):
            bounds.append(f"< {item.lt}")
    if annotation is bool:
        return "true, false"
    return ", ".join(bounds)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_markdown() -> str:
    """``docs/settings.md``: every section, and in it every variable with its default, the
    values it accepts and its description."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated from src/smriti/config/ by `smriti config --markdown > docs/settings.md`;",
        "     tests/test_settings_reference.py fails when this file differs. Edit the code, not this. -->",
        "",
        "Smriti reads its settings from environment variables (names are case-insensitive), once at",
        "start. `smriti config` prints the value of each one in effect and where it came from (its",
        "default, or the environment variable that set it), secrets masked; `smriti config SECTION`",
        "prints one section, `--changed` only what differs from the defaults. A library caller can also",
        "pass settings as arguments (`load_settings(max_hops=2)`). The CLI and a stdio `smriti-mcp`",
        "share one server per user (SMRITI_SHARED): that server was started with the environment of",
        "the client that started it.",
        "",
        "| Section | What it covers |",
        "|---|---|",
    ]
    for section in SECTIONS:
        lines.append(f"| [{section.title}](#{section.slug}) | {_cell(_summary(section))} |")
    for section in SECTIONS:
        lines += ["", f'<a id="{section.slug}"></a>', f"## {section.title}", ""]
        lines += [_summary(section), "", f"`smriti config {section.slug}`", ""]
        lines += ["| Variable | Default | Allowed | Description |", "|---|---|---|---|"]
        for field, info in fields_of(section).items():
            names = " or ".join(f"`{name}`" for name in env_names(field))
            lines.append(
                f"| {names} | `{_cell(default_text(info))}` | {_cell(allowed_text(info))} "
                f"| {_cell(info.description or '')} |"
            )
    lines += ["", "## Read elsewhere", "", *_OTHER_VARIABLES]
    return "\n".join(lines) + "\n"


# Variables that are not settings of the server: read where they are used, by other programs.
_OTHER_VARIABLES = [
    "- `SMRITI_TOKEN`: the CLI's bearer token for `--server URL` (cli/remote.py).",
    "- `LANGSMITH_TRACING`, `LANGCHAIN_TRACING_V2` (and their other spellings): LangSmith tracing;",
    "  LangGraph records every pipeline run there when it is on (docs/executor.md).",
    "- `GIT_SSH_COMMAND`: how git reaches a backup remote over ssh (default `ssh -o BatchMode=yes`).",
]


def _summary(section: type[Section]) -> str:
    """The section's docstring on one line."""
    return " ".join((section.__doc__ or "").split())
