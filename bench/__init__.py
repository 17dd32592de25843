"""Smriti's benchmarks: scripts run from the repository root as modules (``python -m bench.locomo``).

Not part of the installed package: they read the public data in ``../shared/bench`` and
write their sections of ``bench/RESULTS.md``. Their extra packages are the ``[bench]`` extra.
"""
