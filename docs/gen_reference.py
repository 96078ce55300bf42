"""Run by mkdocs-gen-files at every build: writes the reference pages from the code (and the HTTP API's
OpenAPI document beside its page)."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))
from reference_pages import HTTP_DOCUMENT, PAGES

for path, render in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(render())
for path, text in HTTP_DOCUMENT.items():
    with mkdocs_gen_files.open(path, "w") as document:
        document.write(text)
