#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the links between cudamem's Markdown files: every relative link must name a file or
directory that exists, and every `#anchor` a heading of the target page (GitHub's anchor rules:
lower case, punctuation dropped, spaces to hyphens). External links (http, https, mailto) are not
fetched. Code blocks and inline code are skipped.

    python3 tools/check_links.py        exit 1 and list the broken links, else 0
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", "single_include", "node_modules"}
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"\{#([\w-]+)\}\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def markdown_files():
    for path in sorted(ROOT.rglob("*.md")):
        parts = path.relative_to(ROOT).parts
        if any(p in SKIP_DIRS or p.startswith("build") for p in parts):
            continue
        yield path


def strip_code(text):
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    explicit = EXPLICIT_ANCHOR.search(heading)
    if explicit:
        return explicit.group(1)
    heading = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    heading = re.sub(r"[^\w\- ]", "", heading)
    return heading.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        text = strip_code(path.read_text(encoding="utf-8"))
        found.update(HTML_ANCHOR.findall(text))
        for line in text.splitlines():
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def main():
    broken = []
    checked = 0
    for page in markdown_files():
        for target in LINK.findall(strip_code(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            checked += 1
            file_part, _, anchor = target.partition("#")
            destination = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not destination.exists():
                broken.append(f"{where}: {file_part} does not exist")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where}: no heading with anchor #{anchor} in {destination.relative_to(ROOT)}")
    if broken:
        print("broken links:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    print(f"check_links.py: {checked} relative links, all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
