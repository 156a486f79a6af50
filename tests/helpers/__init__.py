"""Shared test helpers: document generators (`documents`) and the `kbbot` runner (`cli`).

Importable from any test module as `from helpers.documents import ...` (pytest puts `tests/` on
sys.path because `tests/` has a conftest.py and no `__init__.py`).
"""
