//! `needle pieces INDEX --questions Q.jsonl`: how an index would be cut into pieces a browser
//! fetches on demand (`needle::build::pieces`), and what that costs and loses on real questions:
//! bytes fetched by a reader's first query and by each further one, and recall of the dense and
//! hybrid rankings against the whole index's, per number of lists probed.

use anyhow::{Context, Result};
use needle::build::pieces::{self, PieceConfig, PiecePlan};
use needle::doc::text::normalize_for_match;
use needle::embed::Embedder;
use needle::query::fuse;
use needle::query::index::Index;
use needle::query::search::{self, foreign_words, QueryVector};
use std::collections::{HashMap, HashSet};
use std::path::Path;

#[derive(clap::Args)]
pub struct PiecesArgs {
    pub index: std::path::PathBuf,
    /// Questions, one JSON object a line: `{"query"}`, or a question set's `{"q_doc","q_ticket"}`
    /// (both asked; with its `"needle"`, recall@20 is reported too).
    #[arg(long, required_unless_present = "write")]
    pub questions: Option<std::path::PathBuf>,
    /// Also write the head and the pieces into DIR (8-bit lists; the head probes the first
    /// --nprobe value).
    #[arg(long, value_name = "DIR")]
    pub write: Option<std::path::PathBuf>,
    /// Inverted lists (default: about 4 √chunks).
    #[arg(long, default_value_t = 0)]
    pub lists: usize,
    /// Lists probed per query: each value is a row of the report.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub nprobe: Vec<usize>,
    #[arg(long, default_value_t = 16)]
    pub lexical_kb: usize,
    #[arg(long, default_value_t = 4)]
    pub content_kb: usize,
    /// Bits per code in the lists: 8 (exact distances) or 4 (lists rank; the shown hits' content
    /// pieces carry their 8-bit vectors for the gate).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(4..=8))]
    pub list_bits: u8,
    /// Hits a reader is shown (their content pieces are fetched).
    #[arg(long, default_value_t = 10)]
    pub shown: usize,
}

struct Question {
    text: String,
    needle: Option<String>,
}

fn questions(path: &Path) -> Result<Vec<Question>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("{} line {}", path.display(), i + 1))?;
        let needle = v["needle"].as_str().map(normalize_for_match);
        let asked: Vec<&str> = ["query", "q_doc", "q_ticket"].iter().filter_map(|f| v[*f].as_str()).collect();
        anyhow::ensure!(!asked.is_empty(), "{} line {}: no query, q_doc or q_ticket", path.display(), i + 1);
        out.extend(asked.into_iter().map(|q| Question { text: q.to_string(), needle: needle.clone() }));
    }
    Ok(out)
}

/// Which of `ranking`'s first 20 chunks hold the needle: recall@20 of one question.
fn found(index: &Index, ranking: &[usize], needle: &str) -> bool {
    ranking.iter().take(20).any(|&c| normalize_for_match(&index.header.chunks[c].content).contains(needle))
}

#[derive(Default)]
struct Row {
    first: Vec<usize>,
    /// Bytes of the first query by kind: lexical pieces, lists, content pieces (sums).
    kinds: [usize; 3],
    further: Vec<usize>,
    /// Bytes of the further queries by kind (sums).
    further_kinds: [usize; 3],
    dense_overlap: f64,
    hybrid_overlap: f64,
    same_answer: usize,
    found_exact: usize,
    found_pieces: usize,
    dense_found_exact: usize,
    dense_found_pieces: usize,
    with_needle: usize,
}

pub fn run(index: &Index, embedder: &Embedder, args: &PiecesArgs) -> Result<()> {
    let config = PieceConfig {
        list_bits: args.list_bits,
        lists: args.lists,
        lexical_bytes: args.lexical_kb * 1024,
        content_bytes: args.content_kb * 1024,
        ..Default::default()
    };
    let t = search::now_ms();
    let plan = PiecePlan::new(index, &config);
    let plan_ms = search::now_ms() - t;
    let h = &index.header;
    let bm = &h.bm25;
    let head = plan.head_bytes(bm);
    let sizes: Vec<usize> = plan.lists.iter().map(Vec::len).collect();
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    let kb = |b: usize| format!("{:.1} KB", b as f64 / 1024.0);
    println!("index      {} chunks, {} pages", h.chunks.len(), h.pages.len());
    println!("plan       {:.1} s", plan_ms / 1e3);
    println!("head       {}", kb(head));
    println!(
        "lists      {} of {}..{} chunks (median {}), {} in all",
        plan.lists.len(),
        sorted.first().unwrap_or(&0),
        sorted.last().unwrap_or(&0),
        sorted.get(sorted.len() / 2).unwrap_or(&0),
        kb((0..plan.lists.len()).map(|l| plan.list_bytes(l)).sum())
    );
    println!("lexical    {} pieces, {} in all", plan.lexical_first.len(), kb(plan.lexical_bytes.iter().sum()));
    println!("content    {} pieces, {} in all", plan.content_first.len(), kb(plan.content_bytes.iter().sum()));

    if let Some(dir) = &args.write {
        let nprobe = args.nprobe.first().copied().unwrap_or(1);
        anyhow::ensure!(args.list_bits == 8, "--write writes 8-bit lists only");
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        let files = pieces::write(index, &plan, nprobe)?;
        let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
        for (name, b) in &files {
            std::fs::write(dir.join(name), b).with_context(|| format!("{}", dir.join(name).display()))?;
        }
        println!("written    {} files, {} in {} (head {})", files.len(), kb(bytes), dir.display(), kb(files[0].1.len()));
    }
    let Some(questions_file) = &args.questions else { return Ok(()) };
    let qs = questions(questions_file)?;
    // What the lists rank by: the index's vectors, or those vectors through coarser codes.
    let coded: Option<Vec<f32>> =
        (args.list_bits < 8).then(|| index.vectors.chunks_exact(plan.dim).flat_map(|v| pieces::through_codes(v, args.list_bits)).collect());
    let max_chunks = h.settings.max_chunks as usize;
    let mut rows: Vec<Row> = args.nprobe.iter().map(|_| Row::default()).collect();
    let mut caches: Vec<HashSet<(u8, usize)>> = args.nprobe.iter().map(|_| HashSet::new()).collect();
    for (qi, q) in qs.iter().enumerate() {
        let qv: QueryVector = embedder.query(&q.text).with_context(|| format!("embedding {:?}", q.text))?;
        let dist = search::distances(index, &qv.vector);
        let coded_dist: Option<Vec<f32>> =
            coded.as_ref().map(|c| c.chunks_exact(plan.dim).map(|v| 1.0 - search::dot(v, &qv.vector)).collect());
        let by_distance = |mut chunks: Vec<usize>| {
            chunks.sort_unstable_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b)));
            chunks
        };
        let exact_dense = by_distance((0..h.chunks.len()).collect());
        let lexical: Vec<usize> = bm.rank(&q.text).into_iter().map(|(c, _)| c).collect();
        let exact_hybrid: Vec<usize> = fuse::rrf(&[&lexical, &exact_dense]).into_iter().map(|(c, _)| c).collect();
        let cut = h.settings.cut_for(foreign_words(index, &q.text, &qv).len());
        let depth = h.settings.gate_depth as usize;
        let gate = |ranking: &[usize], known: &dyn Fn(usize) -> bool| -> Vec<usize> {
            ranking.iter().take(depth).filter(|&&c| known(c) && dist[c] < cut).take(max_chunks).copied().collect()
        };
        let exact_answer = gate(&exact_hybrid, &|_| true);
        let top = |r: &[usize]| r.iter().take(20).copied().collect::<HashSet<usize>>();
        let lexical_pieces = plan.lexical_pieces(bm, &index.header.analyzer(None), &q.text, &qv.unknown_to_model);
        for ((&nprobe, row), cache) in args.nprobe.iter().zip(&mut rows).zip(&mut caches) {
            let probed = plan.probe(&qv.vector, nprobe);
            // The probed lists' chunks and the lexical candidates, as a reader scores them.
            let lexical_candidates = lexical.iter().take(pieces::LEXICAL_CANDIDATES as usize).copied();
            let mut candidates: Vec<usize> =
                probed.iter().flat_map(|&l| plan.lists[l].iter().map(|&c| c as usize)).chain(lexical_candidates.clone()).collect();
            candidates.sort_unstable();
            candidates.dedup();
            let scored: HashSet<usize> = candidates.iter().copied().collect();
            let dense = match &coded_dist {
                Some(d) => {
                    let mut c = candidates;
                    c.sort_unstable_by(|&a, &b| d[a].total_cmp(&d[b]).then(a.cmp(&b)));
                    c
                }
                None => by_distance(candidates),
            };
            let hybrid: Vec<usize> = fuse::rrf(&[&lexical, &dense]).into_iter().map(|(c, _)| c).collect();
            // Distances are known for the scored chunks only: another chunk never answers.
            let answer = gate(&hybrid, &|c| scored.contains(&c));
            row.same_answer += usize::from(answer == exact_answer);
            row.dense_overlap += top(&dense).intersection(&top(&exact_dense)).count() as f64 / 20f64.min(exact_dense.len() as f64).max(1.0);
            row.hybrid_overlap +=
                top(&hybrid).intersection(&top(&exact_hybrid)).count() as f64 / 20f64.min(exact_hybrid.len() as f64).max(1.0);
            if let Some(needle) = &q.needle {
                row.with_needle += 1;
                row.found_exact += usize::from(found(index, &exact_hybrid, needle));
                row.found_pieces += usize::from(found(index, &hybrid, needle));
                row.dense_found_exact += usize::from(found(index, &exact_dense, needle));
                row.dense_found_pieces += usize::from(found(index, &dense, needle));
            }
            let shown: Vec<usize> =
                hybrid.iter().take(args.shown).copied().chain(answer.iter().copied()).chain(lexical_candidates).collect();
            let mut pieces: HashMap<(u8, usize), usize> = HashMap::new();
            pieces.extend(lexical_pieces.iter().map(|&p| ((0, p), plan.lexical_bytes[p])));
            pieces.extend(probed.iter().map(|&l| ((1, l), plan.list_bytes(l))));
            pieces.extend(shown.iter().map(|&c| plan.content_piece(c)).map(|p| ((2, p), plan.content_bytes[p])));
            row.first.push(head + pieces.values().sum::<usize>());
            for ((kind, _), bytes) in &pieces {
                row.kinds[*kind as usize] += bytes;
            }
            if qi > 0 {
                let new: Vec<(&(u8, usize), &usize)> = pieces.iter().filter(|(id, _)| !cache.contains(*id)).collect();
                row.further.push(new.iter().map(|(_, b)| **b).sum());
                for ((kind, _), bytes) in new {
                    row.further_kinds[*kind as usize] += bytes;
                }
            }
            cache.extend(pieces.keys().copied());
        }
    }
    let n = qs.len().max(1) as f64;
    println!("\n{} questions, asked in file order as one reader's session; bytes are uncompressed", qs.len());
    println!("| nprobe | first query (median / max) | of it, mean: head + lexical + lists + content | further query, mean: lexical + lists + content | dense top-20 vs exact | hybrid top-20 vs exact | same gate answer | hybrid R@20 exact → pieces | dense R@20 exact → pieces |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (&nprobe, row) in args.nprobe.iter().zip(&mut rows) {
        row.first.sort_unstable();
        let further = row.further.iter().sum::<usize>() as f64 / row.further.len().max(1) as f64;
        let recall = |a: usize, b: usize| {
            if row.with_needle == 0 {
                "–".to_string()
            } else {
                let w = row.with_needle as f64;
                format!("{:.3} → {:.3}", a as f64 / w, b as f64 / w)
            }
        };
        println!(
            "| {nprobe} | {} / {} | {} + {} + {} + {} | {}: {} + {} + {} | {:.3} | {:.3} | {}/{} | {} | {} |",
            kb(row.first.get(row.first.len() / 2).copied().unwrap_or(0)),
            kb(row.first.last().copied().unwrap_or(0)),
            kb(head),
            kb(row.kinds[0] / qs.len().max(1)),
            kb(row.kinds[1] / qs.len().max(1)),
            kb(row.kinds[2] / qs.len().max(1)),
            kb(further as usize),
            kb(row.further_kinds[0] / row.further.len().max(1)),
            kb(row.further_kinds[1] / row.further.len().max(1)),
            kb(row.further_kinds[2] / row.further.len().max(1)),
            row.dense_overlap / n,
            row.hybrid_overlap / n,
            row.same_answer,
            qs.len(),
            recall(row.found_exact, row.found_pieces),
            recall(row.dense_found_exact, row.dense_found_pieces),
        );
    }
    Ok(())
}
