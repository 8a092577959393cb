"""Refresh the page's message catalogs: extract (planner/locale/babel.cfg, which also pulls in
every note template of planner.core.notes, every error and reason template of
planner.core.errors and the catalog's remarks and refusals) and merge into each language's
messages.po, sorted, without source locations, 100 columns wide. New messages come in untranslated;
tests/web/test_i18n.py fails until every one has a translation.

    python scripts/update_locale.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "planner" / "locale"
POT = LOCALE / "messages.pot"


def main() -> None:
    subprocess.run(
        [sys.executable, "-m", "babel.messages.frontend", "extract", "-w", "100",
         "--no-location", "--sort-output", "-F", str(LOCALE / "babel.cfg"), "-o", str(POT), "."],
        cwd=ROOT,
        check=True,
    )
    with POT.open("rb") as f:
        template = read_po(f)
    for po_path in sorted(LOCALE.glob("*/LC_MESSAGES/messages.po")):
        with po_path.open("rb") as f:
            catalog = read_po(f, locale=po_path.parts[-3])
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        with po_path.open("wb") as f:
            write_po(f, catalog, width=100, no_location=True, sort_output=True)
    with POT.open("wb") as f:
        write_po(f, template, width=100, no_location=True, sort_output=True)


if __name__ == "__main__":
    main()
