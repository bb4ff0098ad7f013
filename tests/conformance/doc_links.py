#!/usr/bin/env python3
"""Docs and comments must cite what exists.

Fails (exit 1, one line per citation) when
  - a Markdown link of a doc ([text](path), [text](path#anchor), [text](#anchor))
    names a file the repo does not have, or an anchor that no heading of the
    target file produces (GitHub's rule: lowercase, punctuation dropped,
    spaces to hyphens, -1, -2... for repeats);
  - a doc names a repo file in backquotes (`sdk/examples/file_sink.c`) that
    does not exist;
  - a source, build or doc file cites docs/NAME.md (optionally #anchor) that
    does not exist, or cites a DESIGN.md (the repo has none);
  - a table row of a doc whose first cell is one folder in backquotes
    (`host/`, `host/commit/`: a layout or module table) names in backquotes
    a folder or source file inside it (`commit/`, `claim.c`) that it does
    not hold.

usage: doc_links.py SOURCE_DIR
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
TOP_DIRS = ("docs", "sdk", "host", "plugins", "tests", "scripts", "cmake")
SKIP_DIRS = {".git", "build", "build-asan", ".cache", "node_modules"}
SOURCE_EXT = (".c", ".h", ".md", ".txt", ".sh", ".py", ".cmake", ".in", ".json")

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
BACKQUOTED = re.compile(r"`([^`\s]+)`")
DOC_CITE = re.compile(r"\b(docs/[A-Za-z0-9_./-]+\.md)(#[a-z0-9_-]+)?")
FENCE = re.compile(r"^\s*```")
# In a layout row: a folder (`store/`) or a source or doc file (`claim.c`).
INSIDE = re.compile(r"^[\w.-]+(/[\w.-]+)*(/|\.(c|h|py|sh|json|md|in|txt))$")


def files():
    for d, subdirs, names in os.walk(ROOT):
        subdirs[:] = sorted(s for s in subdirs
                            if s not in SKIP_DIRS and not s.startswith("build"))
        for n in sorted(names):
            if n.endswith(SOURCE_EXT) or n == "CMakeLists.txt":
                yield os.path.join(d, n)


def slug(heading):
    h = heading.strip().lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors GitHub makes for the headings of a Markdown file."""
    if path not in _anchors:
        seen, out, fenced = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if fenced or not m:
                    continue
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else "%s-%d" % (s, n))
        _anchors[path] = out
    return _anchors[path]


def check_target(src, lineno, target, base_dir, problems):
    path, _, anchor = target.partition("#")
    dest = os.path.normpath(os.path.join(base_dir, path)) if path else src
    where = "%s:%d" % (os.path.relpath(src, ROOT), lineno)
    if not os.path.exists(dest):
        problems.append("%s: cites %s, which does not exist" % (where, target))
    elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
        problems.append("%s: cites %s, but %s has no heading with anchor #%s"
                        % (where, target, os.path.relpath(dest, ROOT), anchor))


def check_layout_row(src, lineno, line, problems):
    """A row `| `DIR/` | ... `name` ... |`: each name is inside DIR."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    heads = BACKQUOTED.findall(cells[0]) if len(cells) > 1 else []
    if len(heads) != 1 or not heads[0].endswith("/"):
        return
    base = os.path.join(ROOT, heads[0])
    if not os.path.isdir(base):
        return  # the folder itself is checked as a citation
    for cell in cells[1:]:
        for t in BACKQUOTED.findall(cell):
            if (INSIDE.match(t) and t.split("/")[0] not in TOP_DIRS
                    and not os.path.exists(os.path.join(base, t))):
                problems.append("%s:%d: the row of %s cites %s, which %s does "
                                "not hold" % (os.path.relpath(src, ROOT),
                                              lineno, heads[0], t, heads[0]))


def outside_code(line, in_code):
    """The line's text outside inline code spans (a span may run on from
    the line before: in_code), and whether a span is open at its end:
    `bucket[16](id)` is code, not a link to "id"."""
    out = []
    for k, part in enumerate(line.split("`")):
        if k:
            in_code = not in_code
        if not in_code:
            out.append(part)
    return " ".join(out), in_code


def main():
    problems = []
    for src in files():
        rel = os.path.relpath(src, ROOT)
        if rel == os.path.join("tests", "conformance", "doc_links.py"):
            continue  # this file names what it looks for
        try:
            with open(src, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except UnicodeDecodeError:
            continue
        is_doc = src.endswith(".md")
        fenced = in_code = False
        for i, line in enumerate(lines, 1):
            if "DESIGN.md" in line:
                problems.append("%s:%d: cites DESIGN.md, which the repo does "
                                "not have" % (rel, i))
            for m in DOC_CITE.finditer(line):
                check_target(src, i, m.group(1) + (m.group(2) or ""), ROOT,
                             problems)
            if not is_doc:
                continue
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            if not line.strip():
                in_code = False  # a code span never crosses a paragraph
            prose, in_code = outside_code(line, in_code)
            if line.startswith("|"):
                check_layout_row(src, i, line, problems)
            for m in LINK.finditer(prose):
                t = m.group(1)
                if re.match(r"^[a-z]+:", t):
                    continue  # http:, https:, mailto:
                check_target(src, i, t, os.path.dirname(src), problems)
            for m in BACKQUOTED.finditer(line):
                t = m.group(1)
                if (t.split("/")[0] in TOP_DIRS and "/" in t
                        and not re.search(r"[<>*${}|]|\.\.\.", t)):
                    check_target(src, i, t, ROOT, problems)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("every cited file and anchor exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
