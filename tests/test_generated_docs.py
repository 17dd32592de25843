"""The architecture prose that names code is generated from it (issue 43, item 6): the package
listing, the files one recall is followed through, recall's step names and counts, the store
interface's parts. The checked-in pages must be what the code gives, and the check must fail on a
stale or unknown region."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smriti.cli import docs

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").glob("*.md"))


def test_the_checked_in_regions_are_what_the_code_generates():
    shown: set[str] = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        shown.update(docs.regions(text))
        assert docs.fill(text) == text, f"{page.name}: a generated region is stale; run: make generated-docs"
        assert docs.unknown_steps(text) == [], page.name
    assert shown == set(docs.REGIONS)


def test_the_package_listing_names_every_module_and_counts_every_folder():
    listing = docs.packages()
    package = docs.PACKAGE
    files = sorted(package.rglob("*.py"))
    assert listing.startswith(f"{len(files)} Python files")
    for path in files:
        if path.name != "__init__.py":
            assert f"- `{path.name}`: " in listing, path
    config_files = len(list((package / "config").glob("*.py")))
    assert f"\n  - **`config/`** ({config_files} files): " in listing  # a package at the root
    root_modules = re.findall(r"^  - `(\w+\.py)`", listing, re.MULTILINE)
    assert root_modules == sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")
    assert "config.py" not in root_modules


def test_recall_steps_come_from_a_real_recall():
    run = docs.recall_run()
    recall = [step.name for step in run.steps["recall"]]
    # The request's check first and the formatted result last, every step once.
    assert recall[0] == "validate_recall" and recall[-1] == "format_result"
    assert len(recall) == len(set(recall))
    assert {"list_recent", "vector_only"}.isdisjoint(recall)
    assert "list_recent" in [step.name for step in run.steps["list"]]
    assert run.trace_wrappers == len(recall)
    for step in run.steps["recall"]:
        assert docs.module_path(step.module).exists(), step
    assert "nodes/state.py" in run.files and "memory.py" in run.files
    walk = docs.walk_modules(run)
    assert walk[: len(docs.BEFORE_THE_STEPS)] == list(docs.BEFORE_THE_STEPS)
    assert walk[-len(docs.THE_DATABASE) :] == list(docs.THE_DATABASE)


def test_the_store_parts_table_names_every_method_once_in_its_part():
    from smriti.stores.base import PART_OF
    from smriti.stores.parts import PARTS

    rows = docs.store_parts().splitlines()[2:]
    assert len(rows) == len(PARTS) + 1  # a row per part and one for GraphStore's own methods
    for name, part in PART_OF.items():
        [row] = [row for row in rows if f"`{name}`" in row]
        assert f"| `{part}` |" in row, (name, row)


def _page(tmp_path: Path, body: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(body, encoding="utf-8")
    return page


def test_a_stale_region_fails_the_check_and_is_rewritten(tmp_path, capsys):
    page = _page(tmp_path, "Hand-written.\n\n<!-- generated:recall-reach -->\nOne recall runs 29 files.\n"
                           "<!-- /generated -->\n\nStill hand-written.\n")  # fmt: skip
    assert docs.main(["--check", str(page)]) == 1
    assert "stale region(s) recall-reach" in capsys.readouterr().err
    assert "29 files" in page.read_text()  # --check changes nothing
    assert docs.main([str(page)]) == 0
    text = page.read_text()
    assert text.startswith("Hand-written.\n\n") and text.endswith(
        "<!-- /generated -->\n\nStill hand-written.\n"
    )
    assert f"{len(docs.recall_run().files)} of the package's files" in text
    assert docs.main(["--check", str(page)]) == 0


def test_an_unknown_region_or_a_retired_step_name_is_an_error(tmp_path, capsys):
    page = _page(tmp_path, "<!-- generated:modules -->\n<!-- /generated -->\n")
    assert docs.main(["--check", str(page)]) == 1
    assert "unknown generated region 'modules'" in capsys.readouterr().err
    with pytest.raises(KeyError, match="unknown generated region"):
        docs.fill(page.read_text())
    steps = _page(tmp_path, "## The steps\n\n1. **parse_query** reads the query.\n\n## Next\n\n**dedupe**\n")
    assert docs.main(["--check", str(steps)]) == 1
    err = capsys.readouterr().err
    assert "**parse_query** under 'The steps' is not a recall step" in err
    assert "dedupe" not in err  # outside the section, bold is only emphasis


def test_first_sentences_read_as_markdown():
    assert docs.first_sentence("The :class:`~smriti.memory.Memory` of ``a|b``. More here.\n\nNext.") == (
        "The `smriti.memory.Memory` of `a\\|b`."
    )
    assert docs.first_sentence("Spans\nlines, e.g. this one") == "Spans lines, e.g. this one"
