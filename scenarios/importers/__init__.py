"""Importers: convert published persona data into scenario files (`spillage scenarios import`).

`import_spillage_json(path, site, out_dir, style="chat")` converts the SPILLage paper's persona
JSON (see `spillage_json`); `spillage_json.main(argv)` is the command line behind
`spillage scenarios import --format spillage-json FILE --site SITE --out DIR [--style STYLE]`.
"""

__all__ = ["SpillageImportError", "import_spillage_json"]


def __getattr__(name: str):
    # Imported on first use, so `python -m spillage.scenarios.importers.spillage_json` runs cleanly.
    if name in __all__:
        from spillage.scenarios.importers import spillage_json

        return getattr(spillage_json, name)
    raise AttributeError(name)
