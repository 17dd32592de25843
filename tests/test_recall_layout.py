"""The recall code reads in pipeline order: a newcomer follows one recall from the MCP tool to
the database in at most 12 files, opening none twice (issue 10).

The node modules are taken from the compiled graph and the order of a real recall's trace, so
moving a step into another module, or adding one, is checked here and not by reading.
"""

import re
from pathlib import Path

from smriti.pipelines.recall import recall_graph, recall_steps
from smriti.pipelines.store import store_graph

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
# What a reader opens before the steps (the tool, the library call, the graph, what flows between
# the steps, the formulas) and after them (the store protocol and the default backend's store,
# which names the collaborator running each query).
BEFORE_THE_STEPS = [
    "smriti.server.app",
    "smriti.memory",
    "smriti.pipelines.recall",
    "smriti.nodes.state",
    "smriti.nodes.search",
    "smriti.nodes.scoring",
]
THE_DATABASE = ["smriti.stores.base", "smriti.stores.sqlite.store"]
MAX_FILES = 12


def _module_of(node: str) -> str:
    return recall_steps.nodes[node].__module__


def _steps_of_a_recall(make_context) -> list[str]:
    context = make_context()
    for text in ("Priya moved the billing service to Postgres", "The billing team meets on Mondays"):
        store_graph.invoke({"content": text}, context=context)
    out = recall_graph.invoke({"query": "billing Postgres", "explain": True}, context=context)
    return [step["node"] for step in out["trace"]]


def _runs(modules: list[str]) -> list[str]:
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def test_each_node_module_holds_one_run_of_consecutive_steps(make_context):
    modules = [_module_of(node) for node in _steps_of_a_recall(make_context)]
    runs = _runs(modules)
    assert len(runs) == len(set(runs)), f"a module is reopened along the recall: {runs}"


def test_one_recall_is_followed_in_at_most_twelve_files(make_context):
    step_modules = _runs([_module_of(node) for node in _steps_of_a_recall(make_context)])
    files = list(dict.fromkeys(BEFORE_THE_STEPS + step_modules + THE_DATABASE))
    assert len(files) <= MAX_FILES, files


def test_the_architecture_page_walks_the_same_files_in_the_same_order(make_context):
    step_modules = _runs([_module_of(node) for node in _steps_of_a_recall(make_context)])
    files = list(dict.fromkeys(BEFORE_THE_STEPS + step_modules + THE_DATABASE))
    paths = [name.removeprefix("smriti.").replace(".", "/") + ".py" for name in files]
    text = ARCHITECTURE.read_text()
    walk = text[text.index("**Following one recall.**") :]
    walk = walk[: walk.index("The helpers a step calls")]
    named = re.findall(r"`([\w/]+\.py)`", walk)
    on_the_path = [p for p in named if p in paths]
    assert on_the_path == paths, named


def test_no_step_module_calls_into_another(make_context):
    """Helpers shared by several steps live in a module of their own (``nodes/candidates.py``),
    so a step module holds only its steps and a reader never jumps back into an earlier one."""
    import ast

    step_modules = set(_runs([_module_of(node) for node in _steps_of_a_recall(make_context)]))
    root = REPO / "src" / "smriti"
    for module in sorted(step_modules):
        path = root / (module.removeprefix("smriti.").replace(".", "/") + ".py")
        imported = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert not (imported & step_modules - {module}), (module, imported & step_modules)
