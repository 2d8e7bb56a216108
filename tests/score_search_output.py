#!/usr/bin/env python3
"""An independent scorer of `needle search` output (Python 3 standard library only).

It shares no code with needle: it reads the question set and the JSON lines `needle search`
wrote, and applies the matching rule of the question sets itself. A test checks that
`needle eval` reports the same rank for every query.

    # the queries to feed `needle search` (ids are "<question id>:doc" / "<question id>:ticket")
    python3 tests/score_search_output.py queries --qrels QRELS.jsonl > queries.jsonl
    needle search INDEX_DIR --k 20 < queries.jsonl > search.jsonl
    # per-query rank of the first answering hit, Recall@k and MRR, as JSON
    python3 tests/score_search_output.py score --qrels QRELS.jsonl --search search.jsonl

Matching rule: a hit answers a query when its quoted content, lowercased and with every run of
whitespace collapsed to one space, contains the question's needle normalised the same way.
"""

import argparse
import json
import sys

PHRASINGS = (("doc", "q_doc"), ("ticket", "q_ticket"))


def normalise(text):
    return " ".join(word.lower() for word in text.split())


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def queries(qrels):
    for phrasing, field in PHRASINGS:
        for q in qrels:
            yield {"id": f"{q['id']}:{phrasing}", "query": q[field]}


def score(qrels, results, ks):
    needles = {q["id"]: normalise(q["needle"]) for q in qrels}
    ranks = {}
    for line in results:
        qid, _, phrasing = line["id"].rpartition(":")
        if qid not in needles or phrasing not in ("doc", "ticket"):
            continue
        needle = needles[qid]
        rank = None
        for position, hit in enumerate(line["hits"], start=1):
            if hit.get("rank", position) != position:
                sys.exit(f"{line['id']}: hit {position} says rank {hit['rank']}; hits must come in rank order")
            if rank is None and needle in normalise(hit["content"]):
                rank = position
        ranks[line["id"]] = rank
    expected = {q["id"] for q in queries(qrels)}
    missing = sorted(expected - ranks.keys())
    if missing:
        sys.exit(f"no search result for {', '.join(missing)}")
    n = len(ranks)
    out = {"n": n, "ranks": ranks, "recall": {}, "hits": {}}
    for phrasing in ("doc", "ticket"):
        sub = [r for key, r in ranks.items() if key.endswith(":" + phrasing)]
        out[phrasing] = {"n": len(sub), "recall": {str(k): sum(1 for r in sub if r is not None and r <= k) / len(sub) for k in ks}}
    for k in ks:
        hits = sum(1 for r in ranks.values() if r is not None and r <= k)
        out["hits"][str(k)] = hits
        out["recall"][str(k)] = hits / n
    out["mrr"] = sum(1.0 / r for r in ranks.values() if r is not None) / n
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("queries", help="print the queries as JSON lines for `needle search`")
    q.add_argument("--qrels", required=True)
    s = sub.add_parser("score", help="score `needle search` output")
    s.add_argument("--qrels", required=True)
    s.add_argument("--search", required=True, help="the JSON lines `needle search` wrote ('-' for stdin)")
    s.add_argument("--k", default="1,4,8,20")
    args = parser.parse_args()
    qrels = read_jsonl(args.qrels)
    if args.command == "queries":
        for item in queries(qrels):
            print(json.dumps(item, ensure_ascii=False))
        return
    if args.search == "-":
        results = [json.loads(line) for line in sys.stdin if line.strip()]
    else:
        results = read_jsonl(args.search)
    ks = [int(k) for k in args.k.split(",")]
    json.dump(score(qrels, results, ks), sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
