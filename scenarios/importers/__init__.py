"""Importers: convert published persona data into scenario files (`spillage scenarios import`).

`spillage_json.import_spillage_json(path, site, out_dir, style=None)` (the style from the file) converts the SPILLage
paper's persona JSON; `spillage_json.main(argv)` is the command line behind
`spillage scenarios import --format spillage-json FILE --site SITE --out DIR [--style STYLE]`.
"""
