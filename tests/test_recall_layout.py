"""The recall code reads in pipeline order: a newcomer follows one recall from the MCP tool to
the database in at most 12 files, opening none twice (issue 10).

The step modules are taken from a real recall (``smriti.cli.docs.recall_run``: each trace entry's
function), so moving a step into another module, or adding one, is checked here and not by reading.
"""

import re
from pathlib import Path

from smriti.cli import docs

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
# What a reader opens before the steps and after them: one list, which the architecture page's
# generated walk uses too.
BEFORE_THE_STEPS = list(docs.BEFORE_THE_STEPS)
THE_DATABASE = list(docs.THE_DATABASE)
MAX_FILES = 12


def _step_modules() -> list[str]:
    """The module of each step of a real recall, in trace order (read from the run, so the same
    whatever shape the graph has)."""
    return [step.module for step in docs.recall_run().steps["recall"]]


def _runs(modules: list[str]) -> list[str]:
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def test_each_node_module_holds_one_run_of_consecutive_steps():
    runs = _runs(_step_modules())
    assert len(runs) == len(set(runs)), f"a module is reopened along the recall: {runs}"


def test_one_recall_is_followed_in_at_most_twelve_files():
    step_modules = _runs(_step_modules())
    files = list(dict.fromkeys(BEFORE_THE_STEPS + step_modules + THE_DATABASE))
    assert len(files) <= MAX_FILES, files


def test_the_architecture_page_walks_the_same_files_in_the_same_order():
    step_modules = _runs(_step_modules())
    files = list(dict.fromkeys(BEFORE_THE_STEPS + step_modules + THE_DATABASE))
    paths = [name.removeprefix("smriti.").replace(".", "/") + ".py" for name in files]
    text = ARCHITECTURE.read_text()
    walk = text[text.index("**Following one recall.**") :]
    walk = walk[: walk.index("The helpers a step calls")]
    named = re.findall(r"`([\w/]+\.py)`", walk)
    on_the_path = [p for p in named if p in paths]
    assert on_the_path == paths, named


def test_no_step_module_calls_into_another():
    """Helpers shared by several steps live in a module of their own (``nodes/candidates.py``),
    so a step module holds only its steps and a reader never jumps back into an earlier one."""
    import ast

    step_modules = set(_step_modules())
    root = REPO / "src" / "smriti"
    for module in sorted(step_modules):
        path = root / (module.removeprefix("smriti.").replace(".", "/") + ".py")
        imported = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert not (imported & step_modules - {module}), (module, imported & step_modules)
