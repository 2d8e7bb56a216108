// Temporary: runs model::convert until the CLI subcommand is wired. Delete after use.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let t = std::time::Instant::now();
    match needle::model::convert(std::path::Path::new(&a[1]), std::path::Path::new(&a[2])) {
        Ok(r) => println!("{r}\n{:.1} s", t.elapsed().as_secs_f64()),
        Err(e) => { eprintln!("{e}"); std::process::exit(1) }
    }
}
