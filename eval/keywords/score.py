#!/usr/bin/env python3
"""Score needle on the keyword query sets (Python 3 standard library only).

    # run `needle search` on each set against its index, print the table, keep the numbers
    python3 eval/keywords/score.py --needle target/release/needle \\
        tests/fixtures/keywords/cargo.jsonl /tmp/idx-cargo \\
        tests/fixtures/keywords/uv.jsonl /tmp/idx-uv --json out.json

    # paired sign test, per site and variant, of "a correct page in the top 3": A before, B after
    python3 eval/keywords/score.py --compare before.json after.json

Arguments come in pairs SET.jsonl INDEX_DIR; a set's name is its file name without `.jsonl`.
Each set line is {"id","query","variant","source","pages"}; every query goes to
`needle search INDEX_DIR --k K` (JSON lines {"id","query"} on stdin, one result per line).

Per site and variant it reports n and three shares with Wilson 95 % intervals:
  listed     the result lists at least one hit;
  top-3      one of the query's pages is among the first 3 distinct pages of the hits (a page's
             rank is the order of its first appearance among the hits);
  no-answer  the result is labelled "no-answer": its `verdict` field when needle writes one
             ("answer" | "results" | "no-answer"), else "answer" when `answer` is non-empty
             and "no-answer" when it is not (needle before the verdict existed).
"""

import argparse
import json
import math
import os
import subprocess
import sys
from collections import OrderedDict

VARIANTS = ("exact", "prefix", "typo")
TOP = 3


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def wilson(k, n, z=1.959964):
    if n == 0:
        return [0.0, 0.0]
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)]


def sign_test(wins, losses):
    """Exact two-sided sign test on the discordant pairs."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def verdict_of(result):
    v = result.get("verdict")
    if v is not None:
        return v
    return "answer" if result.get("answer") else "no-answer"


def page_ranks(hits):
    """Distinct pages in order of first appearance."""
    seen = []
    for h in sorted(hits, key=lambda h: h.get("rank", 0)):
        if h.get("page") not in seen:
            seen.append(h.get("page"))
    return seen


def run_search(needle, index, queries, k, extra):
    inp = "".join(json.dumps({"id": q["id"], "query": q["query"]}, ensure_ascii=False) + "\n" for q in queries)
    cmd = [needle, "search", index, "--k", str(k)] + extra
    p = subprocess.run(cmd, input=inp, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def score_set(queries, results):
    by_id = {r["id"]: r for r in results}
    missing = [q["id"] for q in queries if q["id"] not in by_id]
    if missing:
        sys.exit(f"no search result for {', '.join(missing[:10])}")
    per_query = OrderedDict()
    for q in queries:
        r = by_id[q["id"]]
        ranks = page_ranks(r.get("hits", []))
        rank = next((i + 1 for i, p in enumerate(ranks) if p in q["pages"]), None)
        per_query[q["id"]] = {
            "variant": q["variant"], "query": q["query"], "source": q["source"], "pages": q["pages"],
            "listed": bool(r.get("hits")), "page_rank": rank, "top3": rank is not None and rank <= TOP,
            "verdict": verdict_of(r), "first_pages": ranks[:TOP],
        }
    variants = OrderedDict()
    for v in VARIANTS + ("all",):
        rows = [x for x in per_query.values() if v == "all" or x["variant"] == v]
        n = len(rows)
        if n == 0:
            continue
        out = {"n": n}
        for name, k in (("listed", sum(x["listed"] for x in rows)), ("top3", sum(x["top3"] for x in rows)),
                        ("no_answer", sum(x["verdict"] == "no-answer" for x in rows))):
            out[name] = {"k": k, "share": round(k / n, 4), "ci95": wilson(k, n)}
        variants[v] = out
    return variants, per_query


def fmt(s):
    return f"{s['share']:.3f} [{s['ci95'][0]:.2f}–{s['ci95'][1]:.2f}]"


def print_table(report):
    print("| site | variant | n | listed [95 % CI] | top-3 [95 % CI] | no-answer [95 % CI] |")
    print("|---|---|---:|---|---|---|")
    for site, s in report["sets"].items():
        for v, x in s["variants"].items():
            print(f"| {site} | {v} | {x['n']} | {fmt(x['listed'])} | {fmt(x['top3'])} | {fmt(x['no_answer'])} |")


def print_misses(report):
    for site, s in report["sets"].items():
        for qid, x in s["queries"].items():
            if not x["top3"] or x["verdict"] == "no-answer":
                why = []
                if not x["top3"]:
                    why.append(f"page rank {x['page_rank']}" if x["page_rank"] else "page not in hits")
                if x["verdict"] == "no-answer":
                    why.append("no-answer")
                print(f"  {qid} [{x['variant']}] {x['query']!r}: {', '.join(why)}; "
                      f"want {x['pages']}, got {x['first_pages']}", file=sys.stderr)


def compare(a_path, b_path):
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    print(f"A = {a_path} ({a.get('needle')}), B = {b_path} ({b.get('needle')})")
    print("Top-3 per query, B against A: wins = only B has a correct page in its top 3, losses = only A; "
          "p is the exact two-sided sign test.\n")
    print("| site | variant | n | A top-3 | B top-3 | wins | losses | p | A no-answer | B no-answer |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    pooled = {}
    for site in a["sets"]:
        if site not in b["sets"]:
            continue
        qa, qb = a["sets"][site]["queries"], b["sets"][site]["queries"]
        common = [q for q in qa if q in qb]
        for v in VARIANTS + ("all",):
            ids = [q for q in common if v == "all" or qa[q]["variant"] == v]
            if not ids:
                continue
            w = sum(1 for q in ids if qb[q]["top3"] and not qa[q]["top3"])
            l = sum(1 for q in ids if qa[q]["top3"] and not qb[q]["top3"])
            ta = sum(qa[q]["top3"] for q in ids)
            tb = sum(qb[q]["top3"] for q in ids)
            na = sum(qa[q]["verdict"] == "no-answer" for q in ids)
            nb = sum(qb[q]["verdict"] == "no-answer" for q in ids)
            t = pooled.setdefault(v, [0, 0, 0, 0, 0, 0, 0])
            for i, x in enumerate((len(ids), ta, tb, w, l, na, nb)):
                t[i] += x
            print(f"| {site} | {v} | {len(ids)} | {ta / len(ids):.3f} | {tb / len(ids):.3f} | {w} | {l} | "
                  f"{sign_test(w, l):.4f} | {na} | {nb} |")
    for v, (n, ta, tb, w, l, na, nb) in pooled.items():
        print(f"| pooled | {v} | {n} | {ta / n:.3f} | {tb / n:.3f} | {w} | {l} | {sign_test(w, l):.4f} | {na} | {nb} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="*", metavar="SET INDEX", help="SET.jsonl INDEX_DIR, repeated")
    ap.add_argument("--needle", default="needle", help="the needle binary (default: needle on PATH)")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--json", metavar="OUT", help="write the numbers and every query's outcome here")
    ap.add_argument("--keep", metavar="DIR", help="keep each set's raw `needle search` output as DIR/<set>.search.jsonl")
    ap.add_argument("--misses", action="store_true", help="list every query without a top-3 page or labelled no-answer (stderr)")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="paired sign test between two runs")
    ap.add_argument("--search-arg", action="append", default=[], help="one more argument for `needle search` (repeatable)")
    args = ap.parse_args()

    if args.compare:
        compare(*args.compare)
        return
    if not args.pairs or len(args.pairs) % 2:
        ap.error("give SET.jsonl INDEX_DIR pairs")
    report = {"needle": args.needle, "k": args.k, "top": TOP, "search_args": args.search_arg, "sets": OrderedDict()}
    version = subprocess.run([args.needle, "--version"], capture_output=True, text=True)
    report["needle_version"] = version.stdout.strip()
    for set_path, index in zip(args.pairs[::2], args.pairs[1::2]):
        site = os.path.basename(set_path).removesuffix(".jsonl")
        queries = read_jsonl(set_path)
        results = run_search(args.needle, index, queries, args.k, args.search_arg)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            with open(os.path.join(args.keep, f"{site}.search.jsonl"), "w", encoding="utf-8") as f:
                for r in results:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
        variants, per_query = score_set(queries, results)
        verdict_field = any("verdict" in r for r in results)
        report["sets"][site] = {"set": set_path, "index": index, "verdict_field": verdict_field,
                                "variants": variants, "queries": per_query}
    print(f"{report['needle_version']} ({args.needle}), needle search --k {args.k}; "
          f"top-3 = a correct page among the first {TOP} distinct pages of the hits\n")
    print_table(report)
    if args.misses:
        print_misses(report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
