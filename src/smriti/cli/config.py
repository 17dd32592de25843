"""``smriti config [SECTION]``: every setting in effect, its section and where it came from.

Values come from this process's environment, as ``smriti-mcp`` started from the same shell
would read them; secrets (keys, passwords, tokens, a URL's password) are masked.
``--markdown`` prints the reference page ``docs/settings.md`` is generated from.
"""

from __future__ import annotations

from enum import StrEnum
from itertools import groupby
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from smriti.cli.render import error_line, out, print_json
from smriti.config import SECTIONS, SettingsError, load_settings
from smriti.config.reference import SettingRow, section_of, setting_rows, settings_markdown

# The sections as a choice, so ``smriti config --help`` lists them.
SectionName = StrEnum("SectionName", {section.slug: section.slug for section in SECTIONS})  # type: ignore[misc]

_SECTIONS_HELP = "Sections: " + ", ".join(f"{s.slug} ({s.title})" for s in SECTIONS) + "."


def config(
    ctx: typer.Context,
    section: Annotated[
        SectionName | None, typer.Argument(help="Show only this section.", show_default=False)
    ] = None,
    changed: Annotated[
        bool, typer.Option("--changed", help="Only settings that differ from their default.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the settings reference (docs/settings.md) and exit.")
    ] = False,
) -> None:
    """Show every setting in effect: its section, value and source (default or environment)."""
    if markdown:
        print(settings_markdown(), end="")
        return
    try:
        settings = load_settings()
    except SettingsError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    user = getattr(ctx.obj, "user", None)  # the root --user option
    if user is not None:
        settings = settings.model_copy(update={"accessing_user": user})
    sections = SECTIONS if section is None else (section_of(section.value),)
    rows = setting_rows(settings, sections=sections)
    if user is not None:
        rows = [_from_option(row, "--user") if row.field == "accessing_user" else row for row in rows]
    if changed:
        rows = [row for row in rows if not row.is_default]
    if as_json:
        print_json([row.__dict__ for row in rows])
        return
    for slug, group in groupby(rows, key=lambda row: row.section):
        out().print(_table(slug, list(group)))


config.__doc__ = f"{config.__doc__}\n\n{_SECTIONS_HELP}"

# The app ``smriti config`` loads when named (cli/commands.py, _Commands): the one command.
config_app = typer.Typer(add_completion=False, rich_markup_mode="rich")
config_app.command("config")(config)


def _from_option(row: SettingRow, option: str) -> SettingRow:
    return SettingRow(row.section, row.field, row.variable, row.value, f"option ({option})", row.description)


def _table(slug: str, rows: list[SettingRow]) -> Table:
    table = Table(title=f"{section_of(slug).title} [dim]({slug})[/dim]", title_justify="left")
    table.add_column("Variable", style="cyan", no_wrap=True)
    table.add_column("Value", overflow="fold")
    table.add_column("Source", no_wrap=True)
    for row in rows:
        source = row.source if row.is_default else f"[bold]{escape(row.source)}[/bold]"
        table.add_row(row.variable, escape(row.value), source)
    return table
