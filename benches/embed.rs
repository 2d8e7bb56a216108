//! Single-thread embedding latency natively (tokenization included): a 12-token query, a
//! ~128-token passage and a full 256-token window, for the int8 and the fp32 graph. Texts come
//! from the model reference fixture. Needs the converted model: `./build.sh model`.
//!
//! cargo bench --bench embed

use criterion::{criterion_group, criterion_main, Criterion};
use needle::embed::{Embedder, MAX_TOKENS};
use needle::model::ModelFiles;
use std::hint::black_box;
use std::time::Duration;

#[derive(serde::Deserialize)]
struct Reference {
    items: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    text: String,
    ids: Vec<i64>,
}

/// The reference text whose token count is closest to `n`.
fn text_of(items: &[Item], n: usize) -> &str {
    let best = items.iter().min_by_key(|it| it.ids.len().abs_diff(n)).expect("reference items");
    &best.text
}

fn bench(c: &mut Criterion) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/model/reference.json");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let r: Reference = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    let files = ModelFiles::locate().unwrap_or_else(|e| panic!("{e}"));
    let tokenizer = std::fs::read(&files.tokenizer).unwrap_or_else(|e| panic!("{e}"));
    let texts = [("query12", text_of(&r.items, 12)), ("passage128", text_of(&r.items, 128)), ("passage256", text_of(&r.items, MAX_TOKENS))];

    for (precision, model_path) in [("int8", &files.model), ("fp32", &files.fp32)] {
        let model = std::fs::read(model_path).unwrap_or_else(|e| panic!("{}: {e}", model_path.display()));
        let emb = Embedder::from_bytes(&model, &tokenizer).unwrap_or_else(|e| panic!("{e}"));
        let mut group = c.benchmark_group(format!("embed_{precision}"));
        group.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        for (name, text) in texts {
            let n = emb.token_count(text).expect("count").min(MAX_TOKENS);
            group.bench_function(format!("{name} ({n} tokens)"), |b| b.iter(|| emb.embed(black_box(text)).expect("embed")));
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
