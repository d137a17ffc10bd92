#!/usr/bin/python3
"""Checks the documentation links of the repository: every relative Markdown link
(`[text](path)` or `[text](path#anchor)`) in a .md file, and every `<file>.md#anchor`
named in a source comment or document, points to a file that exists and, with an anchor,
to one of its headings (GitHub's anchor of the heading text).

    scripts/check-doc-links.py [--root DIR]

Exit 0 when every link resolves, 1 when some does not (each printed as path:line: link:
why).
"""

import argparse
import os
import re
import sys

SOURCE_DIRS = ["core", "server", "client", "bench", "proto", "tests", "fuzz", "scripts",
               "docs", "examples", "deploy"]
SOURCE_EXTS = (".h", ".cc", ".proto", ".py", ".md", ".sh", ".txt")
SKIP_DIRS = {"build", ".git", "node_modules", "__pycache__", "testdata"}

MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A file.md#anchor mention in prose or a comment; an anchor cut by a line break ends in "-".
MENTION = re.compile(r"([A-Za-z0-9_./-]*[A-Za-z0-9_]\.md)#([A-Za-z0-9-]*[A-Za-z0-9])(?![A-Za-z0-9-])")


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[`*_]", "", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                m = re.match(r"#+\s+(.*)", line)
                if m and not in_code:
                    found.add(slug(m.group(1)))
                for a in re.findall(r'<a (?:name|id)="([^"]+)"', line):
                    found.add(a)
        cache[path] = found
    return cache[path]


def files(root):
    for top in SOURCE_DIRS + ["."]:
        base = os.path.join(root, top)
        if top == ".":
            for name in os.listdir(root):
                if name.endswith(".md"):
                    yield os.path.join(root, name)
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for name in filenames:
                if name.endswith(SOURCE_EXTS):
                    yield os.path.join(dirpath, name)


def resolve(root, source, target):
    """The file a link or mention names: relative to its file, else to the root."""
    for base in (os.path.dirname(source), root):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.exists(path):
            return path
    return None


def check(root):
    problems = []
    for source in sorted(set(files(root))):
        rel = os.path.relpath(source, root)
        if rel == os.path.join("scripts", "check-doc-links.py"):
            continue
        with open(source, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            links = []
            if source.endswith(".md"):
                for target in MD_LINK.findall(line):
                    if re.match(r"[a-z]+:", target):
                        continue
                    links.append(target)
            for name, anchor in MENTION.findall(line):
                links.append(f"{name}#{anchor}")
            for link in links:
                target, _, anchor = link.partition("#")
                if target == "":
                    path = source
                else:
                    path = resolve(root, source, target)
                if path is None:
                    problems.append(f"{rel}:{number}: {link}: no such file")
                    continue
                if anchor and path.endswith(".md") and anchor not in anchors(path):
                    problems.append(f"{rel}:{number}: {link}: no heading #{anchor} in "
                                    f"{os.path.relpath(path, root)}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(problems)} broken documentation links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
