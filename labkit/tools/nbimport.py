"""Import this module before nbformat, nbclient or papermill: they then load in a fraction of the time.

nbformat validates notebooks with jsonschema, whose import builds about 35 Earley parsers
(``rfc3987_syntax``) for the "iri" string formats that no notebook schema uses: about 3.4 CPU-seconds
in every process that reads a notebook (python-jsonschema/jsonschema#1428). Marked missing here, that
optional module leaves jsonschema without an "iri" format checker, and nothing else changes.
The tests' pytest loads this module first (``-p labkit.tools.nbimport`` in pyproject.toml), before
nbval imports nbformat.
"""
import sys

sys.modules.setdefault("rfc3987_syntax", None)
