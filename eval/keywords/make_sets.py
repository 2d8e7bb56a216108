#!/usr/bin/env python3
"""Keyword query sets from a built documentation site (Python 3 standard library only).

Reads every HTML page of a site folder, takes its page and section titles (`<h1>`, `<h2>`,
`<h3>` inside mdBook's `<main>` or MkDocs Material's `article.md-content__inner`), keeps those
of 1-3 words as a reader would type them into a search box, and writes one JSON line per query:

    {"id": "cargo-kw-001", "query": "build scripts", "variant": "exact",
     "source": "build scripts", "pages": ["reference/build-scripts.html"]}

Each exact query has up to two variants derived from it with a fixed seed:
  prefix: the last word cut to its first 4-6 letters (only when that word has >= 5 letters;
          the cut is always a proper prefix);
  typo:   one dropped, doubled or swapped-adjacent letter in one word of >= 5 letters, the
          word and position drawn by the seeded RNG; drawn again when the result is a word
          of the site's own vocabulary or a prefix of the word (a dropped last letter is the
          prefix variant's case).

    python3 eval/keywords/make_sets.py SITE_DIR --name cargo --out tests/fixtures/keywords/cargo.jsonl \\
        [--seed 32] [--max 100] [--must "installation,build scripts"] [--status STATUS.json]

See eval/keywords/README.md for the rules.
"""

import argparse
import fnmatch
import html.parser
import json
import os
import random
import re
import sys
from collections import defaultdict

# needle's default exclusions that concern HTML pages (src/doc/extract.rs DEFAULT_EXCLUDES).
EXCLUDES = ["print.html", "toc.html", "*/print.html", "*/toc.html", "404.html", "search.html",
            "genindex.html", "py-modindex.html", "*.rs.html", "_static/*", "*/_static/*",
            "_sources/*", "*/_sources/*", "assets/*", "static/*", "needle/*"]

# needle's BM25 stop words (src/query/bm25.rs STOP_WORDS).
STOP_WORDS = set("""a about all also am an and any are as at be been but by can could did do
does doesn don for from get got had has have he her him his how i if in into is isn it its just
me my no not of on one or our out she should so some such t than that the their them then there
these they this those to too up us use using very was we were what when where which who why will
with would you your""".split())

LEADING_ARTICLES = ("the", "a", "an")

# A section title found on more than this many pages is too ambiguous to be a keyword query
# ("Examples", "Options", "Description" on every command page).
MAX_PAGES = 3

# Headings that lead elsewhere rather than name a topic.
BOILERPLATE = {"learn more", "next steps", "see also", "further reading"}

WORD = re.compile(r"[a-z]+")


class Page(html.parser.HTMLParser):
    """The headings and the text of a page's content root."""

    def __init__(self, kind):
        super().__init__(convert_charrefs=True)
        self.kind = kind          # "mdbook" (<main>) | "mkdocs" (article.md-content__inner)
        self.found = False
        self.depth = 0            # >0 while inside the content root
        self.root_tag = None
        self.heading = None       # (level, [text]) while inside h1-h3 in the root
        self.skip = 0             # >0 inside a permalink mark
        self.headings = []        # (level, text)
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if self.depth == 0:
            if self.found:
                return
            if self.kind == "mkdocs" and tag == "article" and "md-content__inner" in cls:
                self.found, self.root_tag, self.depth = True, "article", 1
            elif self.kind == "mdbook" and tag == "main":
                self.found, self.root_tag, self.depth = True, "main", 1
            return
        if tag == self.root_tag:
            self.depth += 1
        if tag in ("h1", "h2", "h3") and self.heading is None:
            self.heading = (int(tag[1]), [])
        if tag == "a" and "headerlink" in cls:
            self.skip += 1
        elif self.skip and tag == "a":
            self.skip += 1

    def handle_endtag(self, tag):
        if self.depth == 0:
            return
        if self.skip and tag == "a":
            self.skip -= 1
        if self.heading and tag == f"h{self.heading[0]}":
            self.headings.append((self.heading[0], "".join(self.heading[1])))
            self.heading = None
        if tag == self.root_tag:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth == 0 or self.skip:
            return
        self.text.append(data)
        if self.heading:
            self.heading[1].append(data)


def excluded(rel):
    return any(fnmatch.fnmatchcase(rel, p) for p in EXCLUDES)


def read_site(site):
    """{page path: Page}, paths relative to the site root with '/' separators, sorted."""
    pages = {}
    for dirpath, dirnames, filenames in os.walk(site):
        dirnames.sort()
        for f in sorted(filenames):
            if not f.lower().endswith((".html", ".htm")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, site).replace(os.sep, "/")
            if excluded(rel):
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            p = Page("mkdocs" if "md-content__inner" in text else "mdbook")
            p.feed(text)
            p.close()
            if not p.found or not "".join(p.text).strip():
                continue  # a redirect stub or a page without a content root
            pages[rel] = p
    # A folder's index.html that repeats another page (mdBook's copy of its first chapter):
    # needle keeps the other page, and so do we.
    by_text = defaultdict(list)
    for rel, p in pages.items():
        by_text[" ".join("".join(p.text).split())].append(rel)
    for rels in by_text.values():
        others = [r for r in rels if not (r == "index.html" or r.endswith("/index.html"))]
        if others:
            for rel in rels:
                if rel not in others:
                    del pages[rel]
    return dict(sorted(pages.items()))


def as_query(title):
    """A heading as a reader would type it, or None when it is no keyword query."""
    t = title.replace("\u00b6", " ").replace("\u00a0", " ").strip().lower()
    t = re.sub(r"\(\s*\d+\s*\)", " ", t)  # a man page's section: "cargo-add(1)"
    # Punctuation a reader would not type: brackets, code marks, quotes, colons, commas...
    t = re.sub(r"[\[\]`\"'\u2018\u2019\u201c\u201d()<>{}:;,!?#*=|/\\&+]", " ", t)
    t = t.replace("\u2014", " ").replace("\u2013", " ")
    words = [w.strip(".-_") for w in t.split()]
    words = [w for w in words if w]
    while words and words[0] in LEADING_ARTICLES:
        words = words[1:]
    if not 1 <= len(words) <= 3:
        return None
    if not any(WORD.search(w) for w in words):
        return None
    if all(w in STOP_WORDS for w in words):
        return None
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*( [a-z0-9][a-z0-9._-]*)*", " ".join(words)):
        return None  # other scripts, symbols: not a typed query
    if any(re.fullmatch(r"\d+([.-]\d+)+", w) for w in words):
        return None  # a release's version or date ("cargo 1.80 (2024-07-25)")
    return " ".join(words)


def vocabulary(pages):
    vocab = set()
    for p in pages.values():
        vocab.update(WORD.findall("".join(p.text).lower()))
    return vocab


def prefix_variant(query, rng):
    words = query.split()
    last = words[-1]
    if not (last.isalpha() and len(last) >= 5):
        return None
    cuts = [n for n in (4, 5, 6) if n < len(last)]
    n = rng.choice(cuts)
    return " ".join(words[:-1] + [last[:n]])


def typo_variant(query, rng, vocab):
    words = query.split()
    eligible = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 5]
    if not eligible:
        return None
    for _ in range(200):
        i = rng.choice(eligible)
        w = words[i]
        kind = rng.choice(("drop", "double", "swap"))
        if kind == "drop":
            j = rng.randrange(len(w))
            t = w[:j] + w[j + 1:]
        elif kind == "double":
            j = rng.randrange(len(w))
            t = w[:j + 1] + w[j] + w[j + 1:]
        else:
            j = rng.randrange(len(w) - 1)
            if w[j] == w[j + 1]:
                continue
            t = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        if t == w or t in vocab or w.startswith(t):
            continue  # not a slip (a word of the site), or a prefix (a dropped last letter)
        return " ".join(words[:i] + [t] + words[i + 1:])
    return None


# Words a manifest's or configuration's reference adds to the name it documents: "The [patch]
# section", "The `links` field" are about "patch" and "links".
GENERIC_TAIL = {"section", "field", "table", "key"}


def fold(query):
    """A title's key: its alphanumeric runs (needle's tokens) without a plural -s and without a
    generic last word, so "test" and "tests", "manifest-commands" and "manifest commands",
    "patch" and "patch section" are one title."""
    words = re.findall(r"[a-z0-9]+", query)
    if len(words) > 1 and words[-1] in GENERIC_TAIL:
        words = words[:-1]
    return " ".join(w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w for w in words)


def titles(pages):
    """{query: pages where a heading reads so, or so up to a plural -s}, {query: heading levels}."""
    where = defaultdict(set)
    levels = defaultdict(set)
    folded = defaultdict(set)
    times = defaultdict(int)
    for rel, p in pages.items():
        changelog = re.search(r"(^|/)(changelog|changes|release-notes|news)[^/]*$", rel, re.I)
        for level, text in p.headings:
            if changelog and level > 1:
                continue  # a release's "Added", "Performance": structure of the log, not topics
            q = as_query(text)
            if q:
                where[q].add(rel)
                levels[q].add(level)
                folded[fold(q)].add(rel)
                times[q] += 1
    # A heading repeated more than MAX_PAGES times, even on one page ("Added", "Fixed" in a
    # changelog), is structure, not a topic: it counts as on that many pages.
    return {q: folded[fold(q)] if times[q] <= MAX_PAGES else set(range(times[q])) for q in where}, levels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("site")
    ap.add_argument("--name", required=True, help="id prefix: <name>-kw-NNN")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--max", type=int, default=100, help="at most this many exact queries (page titles first)")
    ap.add_argument("--must", default="", help="comma-separated exact queries that must be in the set")
    ap.add_argument("--status", help="`needle status INDEX --json` output: keep only pages the index holds")
    args = ap.parse_args()

    pages = read_site(args.site)
    if args.status:
        with open(args.status, encoding="utf-8") as f:
            st = json.load(f)
        ok = {p["path"] for p in st["pages"] if p.get("state") == "ok"}
        dropped = sorted(set(pages) - ok)
        if dropped:
            print(f"{len(dropped)} pages not in the index: {', '.join(dropped[:10])}", file=sys.stderr)
        pages = {k: v for k, v in pages.items() if k in ok}
    vocab = vocabulary(pages)
    where, levels = titles(pages)
    # Words on more than 90 % of the pages (the product's own name: "cargo", "uv") name no page.
    df = defaultdict(int)
    for p in pages.values():
        for w in set(WORD.findall("".join(p.text).lower())):
            df[w] += 1
    common = {w for w, n in df.items() if n * 10 > 9 * len(pages)}
    # A one-word section heading (not a page's title) whose word is on more than half the
    # pages ("Code", "Example") is generic: it names no page.
    generic = {q for q in where if " " not in q and 1 not in levels[q] and df[q] * 2 > len(pages)}
    candidates = {q: sorted(ps) for q, ps in where.items()
                  if len(ps) <= MAX_PAGES and q not in BOILERPLATE and q not in generic
                  and not all(w in common or w in STOP_WORDS for w in q.split())}
    ambiguous = sorted(q for q, ps in where.items() if len(ps) > MAX_PAGES)

    rng = random.Random(args.seed)
    must = [m.strip() for m in args.must.split(",") if m.strip()]
    for m in must:
        if m not in candidates:
            sys.exit(f"--must {m!r} is not a title of 1-3 words on at most {MAX_PAGES} pages")
    # One query per title up to plural and punctuation ("workspace", "workspaces"): the --must
    # form, else a page title's form, else the first in order.
    keep = {}
    for q in sorted(candidates, key=lambda q: (q not in must, 1 not in levels[q], q)):
        keep.setdefault(fold(q), q)
    n_excluded = len(where) - len(ambiguous) - len(candidates)
    candidates = {q: ps for q, ps in candidates.items() if keep[fold(q)] == q}
    page_titles = sorted(q for q in candidates if 1 in levels[q] and q not in must)
    sections = sorted(q for q in candidates if 1 not in levels[q] and q not in must)
    # A code identifier ("cargo-build", "uv_cache_dir", "build.warnings"): typed too, but a
    # reference page has hundreds; they get at most a fifth of the page titles and of the
    # section titles drawn (and have no variants unless a word of them is all letters).
    def draw(pool, room):
        ident = [q for q in pool if re.search(r"[._\d-]", q)]
        plain = [q for q in pool if q not in ident]
        rng.shuffle(plain)
        rng.shuffle(ident)
        n_ident = min(len(ident), room // 5)
        return ident[:n_ident] + plain[:room - n_ident]

    chosen = list(must)
    chosen += draw(page_titles, max(args.max // 2 - len(chosen), 0))
    chosen += draw(sections, args.max - len(chosen))
    chosen += draw([q for q in page_titles if q not in chosen], args.max - len(chosen))  # a small site
    chosen.sort()

    rows = []
    n = 0
    for q in chosen:
        qrng = random.Random(f"{args.seed}:{q}")  # a query's variants do not depend on the others
        variants = [("exact", q), ("prefix", prefix_variant(q, qrng)), ("typo", typo_variant(q, qrng, vocab))]
        for variant, text in variants:
            if text is None:
                continue
            n += 1
            rows.append({"id": f"{args.name}-kw-{n:03d}", "query": text, "variant": variant, "source": q,
                         "pages": candidates[q]})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = defaultdict(int)
    for r in rows:
        counts[r["variant"]] += 1
    print(f"{args.out}: {len(pages)} pages, {len(where)} titles of 1-3 words, {len(ambiguous)} of them on more than "
          f"{MAX_PAGES} pages, {n_excluded} generic or boilerplate; "
          f"{len(candidates)} candidates after merging plural and punctuation forms "
          f"({len(page_titles) + len(must)} page titles); "
          f"exact {counts['exact']}, prefix {counts['prefix']}, typo {counts['typo']}", file=sys.stderr)

if __name__ == "__main__":
    main()
