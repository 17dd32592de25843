"""Each pipeline's steps as documentation, read from the pipeline's own definition.

The docs pages show the store, recall and consolidate pipelines as a Mermaid flowchart and a
table of steps (the module and function of each, and the first paragraph of its docstring).
Both are generated here from the :class:`~smriti.pipelines.pipeline.Pipeline` objects, never
drawn by hand, and written between markers in a page::

    <!-- pipeline:recall:start -->
    ...generated...
    <!-- pipeline:recall:end -->

``python -m smriti.pipelines.diagram docs/*.md`` rewrites the blocks; ``--check`` exits 1 when a
page differs from what the code gives (``make docs`` and ``tests/test_docs.py`` run it), so a
step added, renamed or moved cannot leave the docs behind. No LangGraph import: the diagram is
of the pipelines step by step, whose steps production's stages run in order (``stages.py``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from smriti.pipelines.pipeline import END, START, Pipeline

# The pipelines the docs show, step by step: name -> (module, the module's pipeline attribute).
PIPELINES = {
    "store": ("smriti.pipelines.store", "store_steps"),
    "recall": ("smriti.pipelines.recall", "recall_steps"),
    "consolidate": ("smriti.pipelines.consolidate", "consolidate_steps"),
}
# Mermaid ids: "end" is a keyword of flowcharts, so the exit gets another id.
_TERMINALS = {START: "start([start])", END: "finish([end])"}
_BLOCK = re.compile(r"(<!-- pipeline:(\w+):start -->\n).*?(<!-- pipeline:\2:end -->)", re.DOTALL)


def load(name: str) -> Pipeline:
    """The pipeline the docs call ``name`` (one of :data:`PIPELINES`)."""
    if name not in PIPELINES:
        raise KeyError(f"unknown pipeline {name!r}; pipelines are {sorted(PIPELINES)}")
    module, attribute = PIPELINES[name]
    return getattr(importlib.import_module(module), attribute)


def _successors(pipeline: Pipeline) -> dict[str, list[tuple[str, bool]]]:
    """Each node's next nodes in definition order, with True for a route chosen at run time."""
    out: dict[str, list[tuple[str, bool]]] = {START: [], **{n: [] for n in pipeline.nodes}}
    for source, target in pipeline.edges:
        out[source].append((target, False))
    for sources, target in pipeline.joins:
        for source in sources:
            out[source].append((target, False))
    for source, routes in pipeline.branches.items():
        for _route, ends in routes:
            out[source].extend((end, True) for end in ends)
    return out


def step_order(pipeline: Pipeline) -> list[str]:
    """The steps in an order that runs each after all that lead to it (Kahn's algorithm, ties
    in the order the steps were defined): how a reader follows the pipeline."""
    successors = _successors(pipeline)
    waiting = {node: 0 for node in pipeline.nodes}
    for targets in successors.values():
        for target, _ in targets:
            if target != END:
                waiting[target] += 1
    ready = [target for target, _ in successors[START]]
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for target, _ in successors[node]:
            if target == END:
                continue
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    return order


def mermaid(pipeline: Pipeline) -> str:
    """The pipeline as a Mermaid flowchart: solid edges always run, dashed ones are routes."""
    successors = _successors(pipeline)
    lines = ["flowchart TD"]
    for source in [START, *step_order(pipeline)]:
        for target, routed in successors[source]:
            arrow = "-.->" if routed else "-->"
            lines.append(f"  {_TERMINALS.get(source, source)} {arrow} {_TERMINALS.get(target, target)}")
    return "\n".join(lines)


def _summary(node: Callable[..., object]) -> str:
    """The first paragraph of a step's docstring, in Markdown (reST roles and literals made code)."""
    paragraph = (inspect.getdoc(inspect.unwrap(node)) or "").split("\n\n")[0]
    text = " ".join(paragraph.split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def steps_table(pipeline: Pipeline) -> str:
    """One row a step, in :func:`step_order`: its name, where it lives, what it does."""
    rows = ["| # | step | function | what it does |", "|---:|---|---|---|"]
    for number, name in enumerate(step_order(pipeline), 1):
        function = inspect.unwrap(pipeline.nodes[name])
        where = f"{function.__module__.removeprefix('smriti.')}.{function.__qualname__}"
        rows.append(f"| {number} | `{name}` | `{where}` | {_summary(function)} |")
    return "\n".join(rows)


def render(name: str) -> str:
    """The generated block of one pipeline: its flowchart, then its steps."""
    pipeline = load(name)
    return f"```mermaid\n{mermaid(pipeline)}\n```\n\n{steps_table(pipeline)}\n"


def fill(text: str) -> str:
    """``text`` with every pipeline block regenerated from the code."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{render(m.group(2))}{m.group(3)}", text)


def blocks(text: str) -> Iterator[str]:
    """The names of the pipeline blocks a page holds."""
    return (m.group(2) for m in _BLOCK.finditer(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m smriti.pipelines.diagram",
        description="Regenerate the pipeline blocks of Markdown pages from the code.",
    )
    parser.add_argument("pages", nargs="+", type=Path, help="Markdown files holding pipeline blocks")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for page in args.pages:
        text = page.read_text(encoding="utf-8")
        fresh = fill(text)
        if fresh == text:
            continue
        stale.append(page)
        if not args.check:
            page.write_text(fresh, encoding="utf-8")
    for page in stale:
        verb = "is stale (run: python -m smriti.pipelines.diagram PAGE)" if args.check else "updated"
        print(f"{page}: pipeline diagram {verb}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
