// Temporary: per-call thread CPU time (schedstat, ns) of Embedder::embed, medians. Delete after use.
use needle::embed::Embedder;
use needle::model::ModelFiles;
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}
#[derive(serde::Deserialize)] struct R { items: Vec<I> }
#[derive(serde::Deserialize)] struct I { text: String, ids: Vec<i64> }
fn main() {
    let r: R = serde_json::from_slice(&std::fs::read("tests/fixtures/model/reference.json").unwrap()).unwrap();
    let pick = |n: usize| &r.items.iter().min_by_key(|it| it.ids.len().abs_diff(n)).unwrap().text;
    let f = ModelFiles::locate().unwrap();
    let tok = std::fs::read(&f.tokenizer).unwrap();
    for (p, path) in [("int8", &f.model), ("fp32", &f.fp32)] {
        let m = std::fs::read(path).unwrap();
        let t = std::time::Instant::now();
        let e = Embedder::from_bytes(&m, &tok).unwrap();
        println!("{p} load {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
        for (name, n, iters) in [("query12", 12, 300), ("passage128", 128, 60), ("passage256", 256, 40)] {
            let text = pick(n);
            for _ in 0..3 { e.embed(text).unwrap(); }
            let mut cpu = Vec::new(); let mut wall = Vec::new();
            for _ in 0..iters {
                let (c0, w0) = (cpu_ns(), std::time::Instant::now());
                std::hint::black_box(e.embed(text).unwrap());
                cpu.push((cpu_ns() - c0) as f64 / 1e6); wall.push(w0.elapsed().as_secs_f64() * 1e3);
            }
            cpu.sort_by(|a, b| a.partial_cmp(b).unwrap()); wall.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!("{p} {name:<11} ({:>3} tok): cpu median {:6.2} ms  min {:6.2} | wall median {:6.2} ms", e.token_count(text).unwrap().min(256), cpu[iters/2], cpu[0], wall[iters/2]);
        }
    }
}
