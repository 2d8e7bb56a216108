//! Extraction speed of the documents beyond HTML: the kinds fixture's two real PDF manuals
//! (text of every page, running headers out, outline headings), its CSV and its captions, each
//! from bytes already in memory. BENCHMARKS.md turns the medians into pages (records, cues) per
//! second.
//!
//! cargo bench --bench extract

use criterion::{criterion_group, criterion_main, Criterion};
use needle::doc::{media, pdf, table};
use std::hint::black_box;
use std::path::Path;

fn fixture(rel: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kinds/site").join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("extract");
    g.sample_size(20);
    for (name, rel) in [("pdf_libtasn1_36_pages", "manuals/libtasn1.pdf"), ("pdf_mime_spec_17_pages", "manuals/shared-mime-info-spec.pdf")]
    {
        let bytes = fixture(rel);
        g.bench_function(name, |b| b.iter(|| pdf::pdf_document(rel, black_box(&bytes)).expect("a PDF with text")));
    }
    let csv = fixture("data/text-mime-types.csv");
    g.bench_function("csv_136_records", |b| b.iter(|| table::table_document("t.csv", "t", black_box(&csv)).expect("a table")));
    let vtt = String::from_utf8(fixture("media/tour.vtt")).expect("UTF-8");
    g.bench_function("vtt_10_cues", |b| b.iter(|| media::parse_vtt(black_box(&vtt)).expect("captions")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
