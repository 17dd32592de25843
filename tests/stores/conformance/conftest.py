"""The conformance suite, one module per part of the store interface (:mod:`smriti.stores.parts`).

Each module here is ``test_<part>[_<topic>].py`` and marks its tests with its part, so one part
runs on every backend with ``pytest tests/stores -m <part>`` (``-m "cues or search"``, ...); the
parts are the markers, registered here from :data:`smriti.stores.parts.PARTS` and ``lifecycle``
(GraphStore's own methods). ``tests/stores/test_store_interface.py`` checks that every module
names its part and that each part's modules call every method of the part.
"""

from __future__ import annotations

from smriti.stores.parts import PARTS

PART_MARKERS = ("lifecycle", *PARTS)


def pytest_configure(config) -> None:
    for name in PART_MARKERS:
        config.addinivalue_line(
            "markers", f"{name}: the conformance tests of the store interface's {name} part"
        )
