#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keeps the code in the guides identical to compiled sources.

A guide marks a code block with a comment on the line before it:

    <!-- snippet: docs/snippets/errors.cpp#propagate -->
    ```cpp
    ...
    ```

The block must equal the region of that file between the lines `// [propagate]` and
`// [/propagate]` (or the whole file without `#name`). The files are compiled by CI
(docs/snippets/CMakeLists.txt), so the guides only show code that builds.

    python3 tools/docs_snippets.py          # rewrite the blocks from the sources
    python3 tools/docs_snippets.py --check  # exit 1 when a guide differs from its source
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(r"<!-- snippet: (?P<path>[^#\s]+)(?:#(?P<name>[\w-]+))? -->\n```(?P<lang>\w*)\n(?P<body>.*?)```",
                  re.DOTALL)


def region(path: str, name: str | None) -> str:
    text = (ROOT / path).read_text()
    if name is None:
        return text
    match = re.search(rf"^[ \t]*// \[{name}\]\n(.*?)^[ \t]*// \[/{name}\]\n", text, re.DOTALL | re.MULTILINE)
    if match is None:
        raise SystemExit(f"{path}: no region [{name}]")
    lines = match.group(1).splitlines(keepends=True)
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "".join(l[indent:] if l.strip() else l for l in lines)


def guides():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for guide in guides():
        text = guide.read_text()

        def replace(match):
            body = region(match.group("path"), match.group("name"))
            return (f"<!-- snippet: {match.group('path')}"
                    f"{'#' + match.group('name') if match.group('name') else ''} -->\n"
                    f"```{match.group('lang')}\n{body}```")

        updated = MARK.sub(replace, text)
        if updated != text:
            stale.append(guide.relative_to(ROOT))
            if not check:
                guide.write_text(updated)
    if check and stale:
        print("code in these guides differs from its compiled source: " + ", ".join(map(str, stale)) +
              "\nrun: python3 tools/docs_snippets.py")
        return 1
    print("guides match their sources" if check else f"updated {len(stale)} guide(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
