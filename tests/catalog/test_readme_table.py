"""The README's "What is bundled" tables are the catalog data (regenerate them with
`python -m planner.catalog.table` after building models.json
(scripts/catalog_build.py) or editing gpus.json)."""

from __future__ import annotations

from pathlib import Path

from planner.catalog.table import readme_section

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_lists_what_is_bundled() -> None:
    assert readme_section() in README.read_text("utf-8")
