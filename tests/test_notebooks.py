"""Every notebook executes top to bottom, offline, on a temporary STORAGE_LOCATION."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_there_are_notebooks():
    assert [p.name[:3] for p in NOTEBOOKS] == ["01_", "02_", "03_"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_without_errors(path, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        f"{path.name} is committed with outputs: clear them"
    )
    storage = tmp_path / "storage"
    monkeypatch.setenv("STORAGE_LOCATION", str(storage))
    # The notebooks import their helpers (notebooks/helpers.py) as Jupyter does when started in
    # that folder; here the kernel runs in tmp_path, so the folder goes on its path instead.
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(NOTEBOOK_DIR), os.environ.get("PYTHONPATH")]))
    )
    client = NotebookClient(
        notebook, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    assert any(storage.iterdir()), "the notebook did not use STORAGE_LOCATION"
    assert not list(Path(tmp_path).glob("*.kuzu"))
