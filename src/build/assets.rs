//! The browser bundle's files that come with needle itself, embedded in the binary at compile
//! time: the JavaScript API, worker, widget, highlight, service worker and CSS from `www/`, and
//! (when `pkg/` was built first: see the crate's build script) the WebAssembly engine in both
//! builds and its wasm-bindgen glue, and the lexical core (first answers, landing highlight). Nothing
//! is looked up in a source tree at run time.

/// One embedded file: its name in the bundle (before content hashing) and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! www {
    ($name:literal) => {
        Asset { name: $name, bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/www/", $name)) }
    };
}

/// The files needle's own JavaScript is made of.
#[derive(Debug, Clone, Copy)]
pub struct Www {
    pub api: Asset,
    pub worker: Asset,
    pub widget: Asset,
    pub highlight: Asset,
    pub css: Asset,
    pub sw: Asset,
}

pub const WWW: Www = Www {
    api: www!("needle.js"),
    worker: www!("needle-worker.js"),
    widget: www!("widget.js"),
    highlight: www!("highlight.js"),
    css: www!("widget.css"),
    sw: www!("needle-sw.js"),
};

/// The WebAssembly engine: wasm-bindgen glue, the plain-SIMD build and, optionally, the
/// relaxed-SIMD one; and the lexical core (no model code) with its own glue, without and with
/// the Snowball stemmers (the same glue: the bundle ships the one its site's languages need).
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    pub glue: Asset,
    pub wasm: Asset,
    pub wasm_relaxed: Option<Asset>,
    pub lexical_glue: Asset,
    pub lexical: Asset,
    pub lexical_stem: Asset,
}

#[cfg_attr(not(needle_engine), allow(unused_macros))]
macro_rules! pkg {
    ($name:literal) => {
        Asset { name: $name, bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/pkg/", $name)) }
    };
}

/// The engine this binary carries, if `pkg/` existed when it was compiled.
#[cfg(needle_engine)]
pub const ENGINE: Option<Engine> = Some(Engine {
    glue: pkg!("needle_core.js"),
    wasm: pkg!("needle_core_bg.wasm"),
    #[cfg(needle_engine_relaxed)]
    wasm_relaxed: Some(pkg!("needle_core_relaxed_bg.wasm")),
    #[cfg(not(needle_engine_relaxed))]
    wasm_relaxed: None,
    lexical_glue: pkg!("needle_lexical.js"),
    lexical: pkg!("needle_lexical_bg.wasm"),
    lexical_stem: pkg!("needle_lexical_stem_bg.wasm"),
});
#[cfg(not(needle_engine))]
pub const ENGINE: Option<Engine> = None;
