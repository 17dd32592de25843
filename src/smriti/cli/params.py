"""Plain coercion of the command line's simple parameters, without pydantic.

Typer (0.29) converts every parameter's value through a pydantic ``TypeAdapter``, built when
the parameter is first read: importing pydantic and building the adapters was ~45 % of a
``smriti recall`` beside a running client (``python -X importtime``, issue 44), for values that
are strings, numbers and choices. :func:`plain_parameters` gives those parameters of a built
command a coercer in plain Python; the rest (ranges, paths that must exist, anything else)
keep Typer's. It reads Typer's parameter objects (``_runtime_param``, ``type_descriptor``):
where they are not as expected it changes nothing, so a newer Typer still works, only slower.
"""

from __future__ import annotations

import contextlib
import enum
import types
import typing
from typing import Any


def plain_parameters(command: Any) -> int:
    """Give the simple parameters of ``command`` and its subcommands a plain coercer; returns
    how many were given one."""
    try:
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
    except ImportError:  # another Typer: keep its own coercion
        return 0

    class Plain(RuntimeParam):
        """A string, a number or a choice, converted as Typer's adapter would."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = _unwrapped(self.annotation)
            choices = _choices(kind)
            if choices is not None:
                if isinstance(kind, type) and issubclass(kind, enum.Enum):
                    if isinstance(value, kind):
                        return value
                    if value in choices:
                        return kind(value)
                elif value in choices:
                    return value
                allowed = ", ".join(repr(choice) for choice in choices)
                raise BadParameter(f"{value!r} is not one of {allowed}.", ctx=ctx, param=param)
            if type(value) is kind:
                return value
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise BadParameter(
                    f"{value!r} is not a valid {kind.__name__}.", ctx=ctx, param=param
                ) from None

    def coercer(param: Any) -> Any:
        descriptor = getattr(param, "type_descriptor", None)
        if (
            descriptor is None
            or getattr(param, "_runtime_param", False) is not None
            or not _simple(descriptor)
        ):
            return None
        return Plain(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)

    def plain_help(command: Any) -> None:
        # --help is made per context (get_help_option), after the command is built.
        made = command.get_help_option

        def get_help_option(ctx: Any) -> Any:
            option = made(ctx)
            with contextlib.suppress(AttributeError, TypeError):
                if (plain := coercer(option)) is not None:
                    option._runtime_param = plain
            return option

        command.get_help_option = get_help_option

    try:
        plain = [(param, found) for param in _parameters(command) if (found := coercer(param)) is not None]
        commands = _commands(command)
    except (AttributeError, TypeError):  # not the Typer this was written for: keep its coercion
        return 0
    for param, found in plain:
        param._runtime_param = found
    for each in commands:
        plain_help(each)
    return len(plain)


def _commands(command: Any) -> list[Any]:
    found = [command]
    for sub in getattr(command, "commands", {}).values():
        found += _commands(sub)
    return found


def _parameters(command: Any) -> list[Any]:
    return [param for each in _commands(command) for param in getattr(each, "params", [])]


_SCALARS = (str, int, float, bool)


def _unwrapped(annotation: Any) -> Any:
    """``X | None`` is ``X`` (None never reaches a coercer: a missing value stays None)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _choices(kind: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(kind) is typing.Literal:
        values = typing.get_args(kind)
        return values if all(isinstance(value, str) for value in values) else None
    if isinstance(kind, type) and issubclass(kind, enum.StrEnum):
        return tuple(member.value for member in kind)
    return None


def _simple(descriptor: Any) -> bool:
    info = descriptor.parameter_info
    custom = [getattr(info, name, None) for name in ("parser", "click_type", "min", "max", "callback")]
    if any(value is not None for value in custom) or descriptor.file_annotation is not None:
        return False
    kind = _unwrapped(descriptor.annotation)
    return kind in _SCALARS or _choices(kind) is not None
