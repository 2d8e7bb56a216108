#!/usr/bin/env python3
"""Check the parallel Debian Administrator's Handbook question sets (en-US, de-DE, zh-CN).

Usage: python3 check.py [--root /usr/share/doc/debian-handbook/html]

Needs `snowballstemmer` (pip install snowballstemmer) for the German ticket rule.
Exits with status 1 and prints every problem if a rule is broken.
"""
import argparse
import html
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import snowballstemmer

HERE = Path(__file__).resolve().parent
LANGS = ["en-US", "de-DE", "zh-CN"]
N_QUESTIONS = 40
N_OOD = 30
N_ADJACENT = 22
MIN_PAGES = 20

# English stop list: copied from tests/fixtures/qsets/edition-guide/README.md.
EN_STOP = set("""
a about all also am an and any are as at be been but by can could did do does doesn don for
from get got had has have he her him his how i if in into is isn it its just me my no not of
on one or our out she should so some such t than that the their them then there these they
this those to too up us use using very was we were what when where which who why will with
would you your
""".split())

# German stop list: the Snowball project's standard German stop list
# (snowballstem.org/algorithms/german/stop.txt, also shipped as NLTK's "german" list).
DE_STOP = set("""
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes
anderm andern anderr anders auch auf aus bei bin bis bist da damit dann der den des dem die das
daß dass derselbe derselben denselben desselben demselben dieselbe dieselben dasselbe dazu dein
deine deinem deinen deiner deines denn derer dessen dich dir du dies diese diesem diesen dieser
dieses doch dort durch ein eine einem einen einer eines einig einige einigem einigen einiger
einiges einmal er ihn ihm es etwas euer eure eurem euren eurer eures für gegen gewesen hab habe
haben hat hatte hatten hier hin hinter ich mich mir ihr ihre ihrem ihren ihrer ihres euch im in
indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann kein keine
keinem keinen keiner keines können könnte machen man manche manchem manchen mancher manches mein
meine meinem meinen meiner meines mit muss musste nach nicht nichts noch nun nur ob oder ohne sehr
sein seine seinem seinen seiner seines selbst sich sie ihnen sind so solche solchem solchen
solcher solches soll sollte sondern sonst über um und uns unsere unserem unseren unser unseres
unter viel vom von vor während war waren warst was weg weil weiter welche welchem welchen welcher
welches wenn werde werden wie wieder will wir wird wirst wo wollen wollte würde würden zu zum zur
zwar zwischen
""".split())

DE_STEMMER = snowballstemmer.stemmer("german")

# Distinctive terms of each adjacent OOD query. None of them may occur (as a whole word,
# case-insensitive) in the visible text of any page of any of the three language folders;
# this is how "the handbook does not cover this" was verified. Substring-only hits such as
# "helm" in "overwhelmed" or "hiera" in "hierarchical" are not whole words and do not count.
OOD_TERMS = {
    "dh-ood-01": ["kubernetes", "helm"],
    "dh-ood-02": ["pacman", "archlinux-keyring"],
    "dh-ood-03": ["group policy", "gpo", "gruppenrichtlinie", "gruppenrichtlinienobjekt", "组策略"],
    "dh-ood-04": ["launchd", "plist"],
    "dh-ood-05": ["ansible", "playbook", "idempotent", "幂等"],
    "dh-ood-06": ["terraform"],
    "dh-ood-07": ["zfs send", "zfs receive"],
    "dh-ood-08": ["systemd-nspawn", "machinectl"],
    "dh-ood-09": ["prometheus", "grafana"],
    "dh-ood-10": ["flatpak", "flathub"],
    "dh-ood-11": ["streaming replication", "streaming-replikation", "hot standby", "流复制"],
    "dh-ood-12": ["kpatch", "livepatching", "live patching", "热补丁"],
    "dh-ood-13": ["haproxy"],
    "dh-ood-14": ["elasticsearch", "shards", "副本分片"],
    "dh-ood-15": ["puppet", "hiera"],
    "dh-ood-16": ["vagrant"],
    "dh-ood-17": ["cloud-init", "ec2"],
    "dh-ood-18": ["podman", "rootless"],
    "dh-ood-19": ["github actions", "github-actions"],
    "dh-ood-20": ["homebrew"],
    "dh-ood-21": ["ceph"],
    "dh-ood-22": ["netplan"],
}


def term_hits(term, text):
    """Whole-word, case-insensitive occurrences of term in (lowercased) text. Chinese has no
    word boundaries, so a term containing Han characters is counted as a plain substring."""
    if re.search(r"[\u3400-\u9fff]", term):
        return text.count(term)
    return len(re.findall(r"(?<![^\W_])" + re.escape(term.lower()) + r"(?![^\W_])", text))

# ---------------------------------------------------------------------------
# Text extraction
# ---------------------------------------------------------------------------
PRE, CODE, HEAD = 1, 2, 4
SKIP_TAGS = {"head", "script", "style"}
VOID_TAGS = {"br", "img", "meta", "link", "hr", "input", "col", "area", "base", "wbr"}
BLOCK_TAGS = {"div", "p", "li", "ul", "ol", "dl", "dt", "dd", "pre", "table", "tr", "td", "th",
              "tbody", "thead", "tfoot", "blockquote", "br", "hr", "h1", "h2", "h3", "h4", "h5",
              "h6", "body", "caption", "figure"}
HEADING_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


class _Extractor(HTMLParser):
    """Collects the visible body text as (text, flags) pieces."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []      # (tag, flags it adds, skips)
        self.pieces = []     # (text, flags)

    def _state(self):
        flags, skip = 0, False
        for _, f, s in self.stack:
            flags |= f
            skip = skip or s
        return flags, skip

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in BLOCK_TAGS:
            self.pieces.append((" ", 0))
        if tag in VOID_TAGS:
            return
        cls = (attrs.get("class") or "").split()
        flags = 0
        if tag == "pre":
            flags |= PRE
        if tag == "code":
            flags |= CODE
        if tag in HEADING_TAGS or "title" in cls or "titlepage" in cls or "subtitle" in cls:
            flags |= HEAD
        self.stack.append((tag, flags, tag in SKIP_TAGS))

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCK_TAGS:
            self.pieces.append((" ", 0))

    def handle_endtag(self, tag):
        if tag in VOID_TAGS:
            return
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        if tag in BLOCK_TAGS:
            self.pieces.append((" ", 0))

    def handle_data(self, data):
        flags, skip = self._state()
        if not skip:
            self.pieces.append((data, flags))


def extract(path):
    """Return (text, flags): visible body text with whitespace collapsed to single spaces,
    and a parallel list of per-character flags (PRE / CODE / HEAD)."""
    p = _Extractor()
    p.feed(Path(path).read_text(encoding="utf-8"))
    p.close()
    out, flags = [], []
    for text, f in p.pieces:
        text = html.unescape(text)  # no-op with convert_charrefs, kept for safety
        for ch in text:
            if ch.isspace():
                if not out or out[-1] == " ":
                    continue
                out.append(" ")
                flags.append(f)
            else:
                out.append(ch)
                flags.append(f)
    while out and out[-1] == " ":
        out.pop()
        flags.pop()
    return "".join(out), flags


def norm(s):
    return re.sub(r"\s+", " ", s).strip().lower()


def find_all(hay, needle):
    res, i = [], hay.find(needle)
    while i != -1:
        res.append(i)
        i = hay.find(needle, i + 1)
    return res


# ---------------------------------------------------------------------------
# Overlap rules
# ---------------------------------------------------------------------------
def tokens(s):
    """Lowercase alphanumeric tokens, split on every non-alphanumeric character."""
    return re.findall(r"[^\W_]+", s.lower())


def content_words(s, lang):
    if lang == "en-US":
        return {t for t in tokens(s) if t not in EN_STOP}
    if lang == "de-DE":
        return {DE_STEMMER.stemWord(t) for t in tokens(s) if t not in DE_STOP}
    raise ValueError(lang)


def han_bigrams(s):
    grams = set()
    for run in re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+", s):
        for i in range(len(run) - 1):
            grams.add(run[i:i + 2])
    return grams


def ticket_overlap(needle, ticket, lang):
    if lang == "zh-CN":
        return han_bigrams(needle) & han_bigrams(ticket)
    return content_words(needle, lang) & content_words(ticket, lang)


MAX_OVERLAP = {"en-US": 1, "de-DE": 1, "zh-CN": 2}


def needle_length(needle, lang):
    if lang == "zh-CN":
        return len(re.sub(r"\s+", "", needle))
    return len(needle.split())


LENGTH_LIMITS = {"en-US": (8, 30), "de-DE": (8, 30), "zh-CN": (15, 60)}


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
def load_jsonl(path, problems):
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            problems.append(f"{path.name}:{n}: empty line")
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            problems.append(f"{path.name}:{n}: bad JSON ({e})")
    return rows


def check_lang(lang, root, problems):
    folder = root / lang
    pages = {}
    for f in sorted(folder.glob("*.html")):
        text, flags = extract(f)
        if len(text.lower()) != len(text):
            problems.append(f"{lang}/{f.name}: lowercasing changed the text length")
        pages[f.name] = (text.lower(), flags, text)
    qrels = load_jsonl(HERE / f"{lang}.qrels.jsonl", problems)
    ood = load_jsonl(HERE / f"{lang}.ood.jsonl", problems)

    if len(qrels) != N_QUESTIONS:
        problems.append(f"{lang}: {len(qrels)} questions, expected {N_QUESTIONS}")
    used_pages = set()
    for q in qrels:
        qid = q.get("id", "?")
        where = f"{lang} {qid}"
        if set(q) != {"id", "page", "needle", "q_doc", "q_ticket"}:
            problems.append(f"{where}: keys {sorted(q)}")
            continue
        for k in ("needle", "q_doc", "q_ticket"):
            if not q[k].strip():
                problems.append(f"{where}: empty {k}")
        page, needle = q["page"], q["needle"]
        used_pages.add(page)
        lo, hi = LENGTH_LIMITS[lang]
        n = needle_length(needle, lang)
        if not lo <= n <= hi:
            problems.append(f"{where}: needle length {n} outside {lo}-{hi}")
        if needle != needle.strip() or re.search(r"\s\s", needle):
            problems.append(f"{where}: needle has stray whitespace")
        nn = norm(needle)
        hits = [(name, i) for name, (low, _, _) in pages.items() for i in find_all(low, nn)]
        if len(hits) != 1:
            problems.append(f"{where}: needle occurs {len(hits)} times in {lang} "
                            f"({', '.join(sorted({h[0] for h in hits})) or 'nowhere'})")
        if page not in pages:
            problems.append(f"{where}: page {page} does not exist")
            continue
        low, flags, text = pages[page]
        on_page = find_all(low, nn)
        if not on_page:
            problems.append(f"{where}: needle not on {page}")
        for i in on_page:
            span = flags[i:i + len(nn)]
            if text[i:i + len(nn)] != needle:
                problems.append(f"{where}: needle differs from page text in case or characters: "
                                f"{text[i:i + len(nn)]!r}")
            if any(f & PRE for f in span):
                problems.append(f"{where}: needle overlaps a pre block")
            if any(f & HEAD for f in span):
                problems.append(f"{where}: needle overlaps a heading/title")
            if all(f & CODE for f in span):
                problems.append(f"{where}: needle lies entirely inside inline code")
        ov = ticket_overlap(needle, q["q_ticket"], lang)
        if len(ov) > MAX_OVERLAP[lang]:
            problems.append(f"{where}: q_ticket shares {len(ov)} with needle: {sorted(ov)}")
    if len(used_pages) < MIN_PAGES:
        problems.append(f"{lang}: only {len(used_pages)} distinct pages (< {MIN_PAGES})")

    site = "\n".join(low for low, _, _ in pages.values())
    for o in ood:
        if o.get("kind") == "adjacent" and o.get("id") not in OOD_TERMS:
            problems.append(f"{lang} {o.get('id')}: adjacent query without verified terms")
    for oid, terms in OOD_TERMS.items():
        for term in terms:
            n = term_hits(term, site)
            if n:
                problems.append(f"{lang} {oid}: OOD term {term!r} occurs {n} times in {lang}")

    if len(ood) != N_OOD:
        problems.append(f"{lang}: {len(ood)} ood queries, expected {N_OOD}")
    kinds = [o.get("kind") for o in ood]
    if kinds.count("adjacent") != N_ADJACENT or kinds.count("off-topic") != N_OOD - N_ADJACENT:
        problems.append(f"{lang}: ood kinds {kinds.count('adjacent')} adjacent / "
                        f"{kinds.count('off-topic')} off-topic")
    for o in ood:
        if set(o) != {"id", "query", "kind"} or not o.get("query", "").strip():
            problems.append(f"{lang} {o.get('id')}: bad ood row {o}")
    return qrels, ood, len(pages), len(used_pages)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/usr/share/doc/debian-handbook/html", type=Path)
    args = ap.parse_args()
    problems = []
    results = {}
    for lang in LANGS:
        results[lang] = check_lang(lang, args.root, problems)

    # Alignment across languages: same ids in the same order, same page and kind.
    ref_q = [(q.get("id"), q.get("page")) for q in results[LANGS[0]][0]]
    ref_o = [(o.get("id"), o.get("kind")) for o in results[LANGS[0]][1]]
    want_q = [f"dh-{i:02d}" for i in range(1, N_QUESTIONS + 1)]
    want_o = [f"dh-ood-{i:02d}" for i in range(1, N_OOD + 1)]
    if [r[0] for r in ref_q] != want_q:
        problems.append(f"{LANGS[0]}: question ids are not {want_q[0]}..{want_q[-1]} in order")
    if [r[0] for r in ref_o] != want_o:
        problems.append(f"{LANGS[0]}: ood ids are not {want_o[0]}..{want_o[-1]} in order")
    for lang in LANGS[1:]:
        if [(q.get("id"), q.get("page")) for q in results[lang][0]] != ref_q:
            problems.append(f"{lang}: question ids/pages not aligned with {LANGS[0]}")
        if [(o.get("id"), o.get("kind")) for o in results[lang][1]] != ref_o:
            problems.append(f"{lang}: ood ids/kinds not aligned with {LANGS[0]}")

    for lang in LANGS:
        qrels, ood, n_pages, n_used = results[lang]
        adj = sum(o.get("kind") == "adjacent" for o in ood)
        print(f"{lang}: {n_pages} pages read, {len(qrels)} questions over {n_used} pages, "
              f"{len(ood)} ood ({adj} adjacent, {len(ood) - adj} off-topic)")
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
