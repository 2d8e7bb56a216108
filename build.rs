//! Build script: lets the `needle` binary carry the browser engine. When `./build.sh wasm` has
//! written `pkg/` (the WebAssembly engine and its wasm-bindgen glue), the crate is compiled with
//! `cfg(needle_engine)` and `src/build/assets.rs` embeds them (and the lexical core, which answers
//! first and runs the landing highlight) with `include_bytes!`, so
//! `needle build` writes a complete browser bundle with no source tree around it. Without
//! `pkg/` the crate still builds (the engine itself is compiled from this crate, so it cannot
//! be a prerequisite); such a binary says how to get the bundle. `./build.sh cli` orders the
//! two steps.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(needle_engine)");
    println!("cargo::rustc-check-cfg=cfg(needle_engine_relaxed)");
    let pkg = Path::new("pkg");
    for f in [
        "needle_core_bg.wasm",
        "needle_core.js",
        "needle_core_relaxed_bg.wasm",
        "needle_lexical_bg.wasm",
        "needle_lexical_stem_bg.wasm",
        "needle_lexical.js",
    ] {
        println!("cargo::rerun-if-changed=pkg/{f}");
    }
    let native = std::env::var("CARGO_CFG_TARGET_ARCH").map(|a| a != "wasm32").unwrap_or(true);
    let have = |f: &str| pkg.join(f).is_file();
    if native
        && ["needle_core_bg.wasm", "needle_core.js", "needle_lexical_bg.wasm", "needle_lexical_stem_bg.wasm", "needle_lexical.js"]
            .into_iter()
            .all(have)
    {
        println!("cargo::rustc-cfg=needle_engine");
        if have("needle_core_relaxed_bg.wasm") {
            println!("cargo::rustc-cfg=needle_engine_relaxed");
        }
    }
}
