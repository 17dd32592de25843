"""The architecture prose that names code, generated from the code: the package listing, the
files a reader follows through one recall, and recall's step names and counts.

A page holds each generated part between markers; the prose around them stays hand-written::

    <!-- generated:packages -->
    ...generated...
    <!-- /generated -->

``python -m smriti.cli.docs docs/*.md`` rewrites every region; ``--check`` changes nothing and
exits 1 when one is stale, naming it (``make docs`` and ``tests/test_generated_docs.py`` run it, as
they check ``docs/settings.md`` and the pipeline diagrams). A region of an unknown name is an error.

Recall's steps are read from what a real recall does, not from a list: one offline memory (SQLite
in a temporary folder, hashing embedder, heuristic analyser) stores three memories and recalls
in each mode with ``explain``; the trace gives the step names in order, and the trace wrapper
(``nodes/state.py``'s ``traced``) gives the function, hence the module, behind each name. So a
pipeline reshaped, a step renamed or moved to another module changes the pages at the next
``make generated-docs`` and fails the check until then, whatever shape the graph has.

The same run counts the package's files the recall executes (``bench/recall_path.py`` prints them).
The package listing is each module's first docstring sentence, folder by folder, with file counts;
the store interface's table is each part of ``stores/parts.py`` with its methods.

Hand-written names are checked too: in ``docs/recall.md``'s "The steps", a bold lower-case
identifier (``**find_seed_cluster**``) names a recall step and must be one (:func:`unknown_steps`).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]
_REGION = re.compile(r"(<!-- generated:([\w-]+) -->\n).*?(<!-- /generated -->)", re.DOTALL)
# What a reader opens before recall's steps (the tool, the library call, the graph, what flows
# between the steps, then the first step module's formulas) and after them (the store protocol
# and the default backend's store, which names the collaborator running each query); the step
# modules between come from the recall itself. tests/test_recall_layout.py holds the walk to these.
BEFORE_THE_STEPS = (
    "smriti.server.app",
    "smriti.memory",
    "smriti.pipelines.recall",
    "smriti.nodes.state",
    "smriti.nodes.search",
    "smriti.nodes.scoring",
)
THE_DATABASE = ("smriti.stores.base", "smriti.stores.sqlite.store")
MEMORIES = (
    "Priya moved the billing service to Postgres",
    "The billing team meets on Mondays",
    "Postgres upgrades happen on Fridays",
)
QUERY = "billing Postgres"
MODES = ("recall", "search", "list")


# ----------------------------------------------------------------------------- docstrings
def markdown(text: str) -> str:
    """reST roles and literals made Markdown code, on one line, safe in a table cell."""
    text = " ".join(text.split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, in Markdown."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    match = re.search(r"(?<=[a-z0-9)`'\"][.!?])\s+(?=[A-Z`*(])", paragraph)
    return markdown(paragraph[: match.start()] if match else paragraph)


def module_docstring(path: Path) -> str:
    """A file's module docstring (read, not imported), or an error naming the file."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        raise ValueError(f"{path.relative_to(PACKAGE.parent)}: no module docstring to list it by")
    return docstring


def module_path(module: str) -> Path:
    """``smriti.a.b`` -> the file of that module under the package."""
    relative = Path(*module.split(".")[1:])
    package = PACKAGE / relative / "__init__.py"
    return package if package.exists() else (PACKAGE / relative).with_suffix(".py")


def shown(module: str) -> str:
    """How the pages name a module's file: ``nodes/search.py``."""
    return str(module_path(module).relative_to(PACKAGE))


# ----------------------------------------------------------------------------- the package listing
def packages() -> str:
    """Every module of the package, folder by folder (each nested under its parent): its first
    docstring sentence; each folder with its file count and its ``__init__``'s first sentence."""
    folders = sorted({p.parent for p in PACKAGE.rglob("*.py")}, key=lambda f: f.relative_to(PACKAGE).parts)
    total = sum(1 for _ in PACKAGE.rglob("*.py"))
    lines = [f"{total} Python files in {len(folders)} folders.", ""]
    for folder in folders:
        indent = "  " * len(folder.relative_to(PACKAGE).parts)
        files = sorted(folder.glob("*.py"))
        modules = [path for path in files if path.name != "__init__.py"]
        init = folder / "__init__.py"
        about = (
            first_sentence(module_docstring(init)) if init.exists() else "(a folder without `__init__.py`)"
        )
        name = "smriti/" if folder == PACKAGE else f"{folder.relative_to(PACKAGE)}/"
        lines.append(f"{indent}- **`{name}`** ({len(files)} files): {about}")
        lines += [f"{indent}  - `{path.name}`: {first_sentence(module_docstring(path))}" for path in modules]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- one real recall
@dataclass(frozen=True)
class Step:
    name: str
    module: str


@dataclass(frozen=True)
class RecallRun:
    """What one recall in each mode ran: its steps (trace order) and the package files executed."""

    steps: dict[str, tuple[Step, ...]]  # mode -> steps
    files: tuple[str, ...]  # package files the recall (mode recall) executed, relative to the package
    trace_wrappers: int  # entries into the trace wrapper during that recall


def _wrapped(frame: FrameType) -> Callable[..., Any] | None:
    """The node function a trace wrapper's frame is running (its closure's ``func``)."""
    function = frame.f_locals.get("func")
    return function if callable(function) else None


@contextmanager
def _defaults_only() -> Iterator[None]:
    """The settings' environment variables set aside: the pages show what the defaults run, not
    what the generating shell happens to configure."""
    from smriti.config import Settings, env_names

    names = {name for field in Settings.model_fields for name in env_names(field)}
    saved = {name: os.environ.pop(name) for name in list(os.environ) if name.upper() in names}
    try:
        yield
    finally:
        os.environ.update(saved)


@cache
def recall_run() -> RecallRun:
    """Store three memories offline and recall once per mode (after one recall that warms the
    store), recording each step's function and, for mode recall, every package file executed."""
    from smriti.config import Settings
    from smriti.memory import Memory

    state_file = str(PACKAGE / "nodes" / "state.py")
    functions: dict[str, str] = {}  # step name -> module, from the trace wrapper
    called: dict[str, str] = {}  # any node-module function's name -> module (when no wrapper says)
    nodes_folder = str(PACKAGE / "nodes")
    files: set[str] = set()
    wrappers = 0
    recording_files = False

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal wrappers
        if event != "call":
            return
        name = frame.f_code.co_filename
        if not name.startswith(str(PACKAGE)):
            return
        if recording_files:
            files.add(str(Path(name).relative_to(PACKAGE)))
        if name.startswith(nodes_folder):
            called.setdefault(frame.f_code.co_name, frame.f_globals.get("__name__", ""))
        if name == state_file and frame.f_code.co_name in ("node", "async_node"):
            wrappers += recording_files
            function = _wrapped(frame)
            if function is not None:
                functions[function.__name__] = function.__module__

    steps: dict[str, tuple[Step, ...]] = {}
    # Profiled from the start, every thread: the parallel branches run in a pool whose threads
    # start at the first recall, and a thread sees only a profile set before it starts.
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        with _defaults_only(), tempfile.TemporaryDirectory() as folder:
            settings = Settings(
                storage_location=Path(folder), accessing_user="docs", llm_provider="heuristic",
                embedding_provider="hashing", embedding_dims=64, consolidation_interval=0,
                backup_sync_interval=0,
            )  # fmt: skip
            with Memory.open(settings) as memory:
                for text in MEMORIES:
                    memory.store(text)
                memory.recall(QUERY)  # the store's first reads (caches) are not what a recall runs
                for mode in MODES:
                    recording_files = mode == "recall"
                    out = memory.recall(QUERY, mode=mode, explain=True)
                    recording_files = False
                    steps[mode] = tuple(Step(entry["node"], "") for entry in out["trace"])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    # A step whose trace entry another wrapper wrote: the node-module function of its name.
    functions = {**{n: m for n, m in called.items() if m != "smriti.nodes.state"}, **functions}
    unknown = sorted({step.name for ran in steps.values() for step in ran} - set(functions))
    if unknown:
        raise RuntimeError(f"trace steps without a traced function: {unknown}")
    steps = {
        mode: tuple(Step(step.name, functions[step.name]) for step in ran) for mode, ran in steps.items()
    }
    return RecallRun(steps, tuple(sorted(files)), wrappers)


def _runs(modules: list[str]) -> list[str]:
    """Consecutive repeats collapsed: the modules a reader opens, in order."""
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def walk_modules(run: RecallRun | None = None) -> list[str]:
    """The modules a reader follows one recall through, in order, each once."""
    run = run or recall_run()
    step_modules = _runs([step.module for step in run.steps["recall"]])
    return list(dict.fromkeys([*BEFORE_THE_STEPS, *step_modules, *THE_DATABASE]))


def _names(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def recall_walk() -> str:
    """The numbered files of "Following one recall", with the steps each step module holds."""
    run = recall_run()
    by_module: dict[str, list[str]] = {}
    for step in run.steps["recall"]:
        by_module.setdefault(step.module, []).append(step.name)
    modules = walk_modules(run)
    lines = [f"{len(modules)} files, in this order, none opened twice:", ""]
    for number, module in enumerate(modules, 1):
        about = first_sentence(module_docstring(module_path(module)))
        line = f"{number}. `{shown(module)}`: {about}"
        if module in by_module:
            line += f" Steps: {_names(by_module[module])}."
        lines.append(line)
    return "\n".join(lines)


def recall_reach() -> str:
    """How far one recall's code reaches: files executed and trace entries."""
    run = recall_run()
    return (
        f"One recall (mode recall, offline, SQLite) executes code in {len(run.files)} of the package's "
        f"files, with the providers, the helpers and the SQLite collaborators, and enters the trace "
        f"wrapper {run.trace_wrappers} times: one per step, {len(run.steps['recall'])} steps."
    )


def recall_steps() -> str:
    """Recall's steps per mode, in the order a run's trace lists them, with their modules."""
    run = recall_run()
    lines = []
    for mode in MODES:
        steps = run.steps[mode]
        lines.append(f"- mode `{mode}`, {len(steps)} steps: {_names([s.name for s in steps])}.")
    lines += ["", "| step (mode recall) | module |", "|---|---|"]
    lines += [f"| `{step.name}` | `{shown(step.module)}` |" for step in run.steps["recall"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the store interface
def store_parts() -> str:
    """The store interface's typed parts (``stores/parts.py``), then GraphStore's own methods: each
    with its conformance marker, its methods in declaration order and its docstring's first sentence."""
    from smriti.stores.base import GraphStore
    from smriti.stores.parts import PARTS, methods

    lines = ["| part | marker | methods | what it is for |", "|---|---|---|---|"]
    rows = [
        (f"`{cls.__name__}`", marker, cls, first_sentence(cls.__doc__ or "")) for marker, cls in PARTS.items()
    ]
    rows.append(("`GraphStore` itself", "lifecycle", GraphStore, "Closing, transactions, the lock, stats."))
    for label, marker, cls, about in rows:
        names = [name for name in vars(cls) if name in methods(cls)]  # declaration order
        lines.append(
            f"| {label} | `{marker}` | {len(names)}: {', '.join(f'`{n}`' for n in names)} | {about} |"
        )
    return "\n".join(lines)


REGIONS: dict[str, Callable[[], str]] = {
    "packages": packages,
    "recall-walk": recall_walk,
    "recall-reach": recall_reach,
    "recall-steps": recall_steps,
    "store-parts": store_parts,
}


# ----------------------------------------------------------------------------- pages
def regions(text: str) -> Iterator[str]:
    """The names of the generated regions a page holds."""
    return (m.group(2) for m in _REGION.finditer(text))


def fill(text: str) -> str:
    """``text`` with every generated region rewritten from the code.

    Raises:
        KeyError: a region's name is not one of :data:`REGIONS`.
    """
    for name in regions(text):
        if name not in REGIONS:
            raise KeyError(f"unknown generated region {name!r}; regions are {sorted(REGIONS)}")
    return _REGION.sub(lambda m: f"{m.group(1)}{REGIONS[m.group(2)]().rstrip()}\n{m.group(3)}", text)


_STEPS_SECTION = re.compile(r"^## The steps\n(.*?)(?=^## |\Z)", re.DOTALL | re.MULTILINE)
_BOLD_NAME = re.compile(r"\*\*([a-z][a-z_]*)\*\*")


def unknown_steps(text: str) -> list[str]:
    """Bold lower-case names in a page's "The steps" section that are no recall step."""
    section = _STEPS_SECTION.search(text)
    if section is None:
        return []
    known = {step.name for steps in recall_run().steps.values() for step in steps}
    return sorted({name for name in _BOLD_NAME.findall(section.group(1)) if name not in known})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m smriti.cli.docs",
        description="Regenerate the generated regions of Markdown pages from the code.",
    )
    parser.add_argument("pages", nargs="+", type=Path, help="Markdown files holding generated regions")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    problems = []
    for page in args.pages:
        text = page.read_text(encoding="utf-8")
        try:
            fresh = fill(text)
        except KeyError as error:
            problems.append(f"{page}: {error.args[0]}")
            continue
        for name in unknown_steps(text):
            problems.append(f"{page}: **{name}** under 'The steps' is not a recall step")
        if fresh == text:
            continue
        stale = [name for name in regions(text) if _region_text(text, name) != _region_text(fresh, name)]
        if args.check:
            problems.append(f"{page}: stale region(s) {', '.join(stale)} (run: make generated-docs)")
        else:
            page.write_text(fresh, encoding="utf-8")
            print(f"{page}: updated {', '.join(stale)}", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


def _region_text(text: str, name: str) -> str:
    return "".join(m.group(0) for m in _REGION.finditer(text) if m.group(2) == name)


if __name__ == "__main__":
    sys.exit(main())
