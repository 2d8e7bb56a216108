#![cfg(feature = "native")]

//! Extraction on real generator output: the Rustonomicon as mdBook built it, and one page per
//! generator modelled on its real templates (tests/fixtures/sites/<generator>/). Every page goes
//! through `assert_invariants`, the contract the chunker and the browser script rely on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use needle::doc::extract::{discover, extract_file, Discovered, ExtractError, ExtractOptions, Extracted, SourceFile, SourceKind};
use needle::doc::text::{byte_to_utf16, normalize_for_match, BlockKind, Document};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn sites() -> PathBuf {
    fixtures().join("sites")
}

/// The invariants every extracted page must satisfy.
fn assert_invariants(doc: &Document) {
    let text = &doc.text;
    assert!(!doc.blocks.is_empty(), "{}: a page has at least one block", doc.path);
    assert!(!doc.title.is_empty(), "{}: empty title", doc.path);
    let is_ws = |c: char| c.is_ascii_whitespace();
    let mut prev_end = None;
    for (i, b) in doc.blocks.iter().enumerate() {
        assert!(b.start < b.end, "{}: block {i} is empty", doc.path);
        let Some(s) = text.get(b.start..b.end) else {
            panic!("{}: block {i} range {}..{} is not on char boundaries", doc.path, b.start, b.end)
        };
        assert_eq!(s, s.trim_matches(is_ws), "{}: block {i} is not trimmed: {s:?}", doc.path);
        match prev_end {
            None => assert_eq!(b.start, 0, "{}: text starts before the first block", doc.path),
            Some(end) => assert_eq!(&text[end..b.start], "\n\n", "{}: blocks {} and {i} not separated by \\n\\n", doc.path, i - 1),
        }
        prev_end = Some(b.end);
        if b.kind != BlockKind::Code {
            // Collapsed prose: only single spaces, and `\n` from <br> between non-empty lines.
            assert!(!s.contains("  ") && !s.contains("\n\n"), "{}: block {i} not collapsed: {s:?}", doc.path);
            assert!(!s.contains(['\t', '\r', '\x0c']), "{}: block {i} keeps a tab/CR/FF: {s:?}", doc.path);
            assert!(!s.contains(" \n") && !s.contains("\n "), "{}: block {i} has untrimmed lines: {s:?}", doc.path);
        }
        if let BlockKind::Heading(level) = b.kind {
            assert!((1..=6).contains(&level));
            assert_eq!(b.section.last().map(String::as_str), Some(s.replace('\n', " ").as_str()), "{}: heading section", doc.path);
        }
    }
    assert_eq!(prev_end, Some(text.len()), "{}: text continues after the last block", doc.path);
}

fn opts() -> ExtractOptions {
    ExtractOptions::default()
}

fn source(site: &Path, rel: &str) -> SourceFile {
    let abs = site.join(rel);
    let kind = SourceKind::from_path(&abs).unwrap_or_else(|| panic!("{rel}: not a page extension"));
    SourceFile { rel_path: rel.to_string(), abs_path: abs, kind }
}

fn extract_at(site: &Path, rel: &str, opts: &ExtractOptions) -> Result<Extracted, ExtractError> {
    let src = source(site, rel);
    let bytes = std::fs::read(&src.abs_path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    extract_file(&src, &bytes, opts)
}

/// Extracts a fixture page that must be content, checking the invariants.
fn page(site: &Path, rel: &str) -> Document {
    match extract_at(site, rel, &opts()) {
        Ok(Extracted::Page(doc)) => {
            assert_invariants(&doc);
            doc
        }
        other => panic!("{rel}: expected a page, got {other:?}"),
    }
}

fn page_from_bytes(rel: &str, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    let src = SourceFile {
        rel_path: rel.to_string(),
        abs_path: PathBuf::from(rel),
        kind: SourceKind::from_path(Path::new(rel)).unwrap_or(SourceKind::Html),
    };
    let res = extract_file(&src, bytes, &opts());
    if let Ok(Extracted::Page(doc)) = &res {
        assert_invariants(doc);
    }
    res
}

fn section_of<'a>(doc: &'a Document, block_text: &str) -> &'a [String] {
    let b = doc
        .blocks
        .iter()
        .find(|b| &doc.text[b.start..b.end] == block_text)
        .unwrap_or_else(|| panic!("{}: no block {block_text:?}", doc.path));
    &b.section
}

fn kinds(doc: &Document) -> Vec<(BlockKind, &str)> {
    doc.blocks.iter().map(|b| (b.kind, &doc.text[b.start..b.end])).collect()
}

fn assert_absent(doc: &Document, chrome: &[&str]) {
    for c in chrome {
        assert!(!doc.text.contains(c), "{}: chrome {c:?} leaked into {:?}", doc.path, doc.text);
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// (a) The real mdBook site.

fn nomicon() -> PathBuf {
    fixtures().join("nomicon/site")
}

fn nomicon_pages() -> (Discovered, Vec<(SourceFile, Extracted)>) {
    let site = nomicon();
    let found = discover(&site, &opts()).unwrap_or_else(|e| panic!("{e}"));
    let out = found
        .files
        .iter()
        .map(|src| {
            let bytes = std::fs::read(&src.abs_path).unwrap_or_else(|e| panic!("{}: {e}", src.rel_path));
            let res = extract_file(src, &bytes, &opts()).unwrap_or_else(|e| panic!("{e}"));
            (src.clone(), res)
        })
        .collect();
    (found, out)
}

fn is_top_level_stub(rel: &str) -> bool {
    !rel.contains('/') && (rel.starts_with("arc") || rel.starts_with("vec"))
}

#[test]
fn nomicon_every_page_extracts_and_stubs_are_skipped() {
    let (found, pages) = nomicon_pages();
    let excluded: BTreeSet<&str> = found.excluded.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(excluded, BTreeSet::from(["print.html", "toc.html"]), "{:?}", found.excluded);
    assert!(found.files.windows(2).all(|w| w[0].rel_path < w[1].rel_path), "sorted");
    assert_eq!(found.files.len(), 85 - 2, "85 .html files, print.html and toc.html excluded");
    let mut content = 0;
    for (src, res) in &pages {
        match res {
            Extracted::Page(doc) => {
                assert!(!is_top_level_stub(&src.rel_path), "{} is a redirect stub", src.rel_path);
                assert_invariants(doc);
                assert_eq!(doc.path, src.rel_path);
                content += 1;
            }
            Extracted::Skipped(reason) => {
                assert!(is_top_level_stub(&src.rel_path), "{} skipped: {reason}", src.rel_path);
                assert!(reason.starts_with("redirect stub"), "{}: {reason}", src.rel_path);
            }
        }
    }
    let stubs = pages.iter().filter(|(s, _)| is_top_level_stub(&s.rel_path)).count();
    assert_eq!(stubs, 19, "7 arc*.html and 12 vec*.html stubs at the top level");
    assert_eq!(content, 83 - 19);
    // A stub's target is named.
    let arc = pages.iter().find(|(s, _)| s.rel_path == "arc.html").map(|(_, r)| r.clone());
    assert_eq!(arc, Some(Extracted::Skipped("redirect stub (meta refresh to ./arc-mutex/arc.html)".into())));
}

#[test]
fn nomicon_titles_come_from_the_first_h1() {
    let site = nomicon();
    let races = page(&site, "races.html");
    assert_eq!(races.title, "Data Races and Race Conditions");
    assert!(races.text.starts_with("Data Races and Race Conditions\n\nSafe Rust guarantees an absence of data races"));
    assert_eq!(races.blocks[0].kind, BlockKind::Heading(1));
    // List items are their own blocks under the h1.
    assert_eq!(section_of(&races, "one or more of them is a write"), strs(&["Data Races and Race Conditions"]));
    // mdBook's hidden `# fn main() {` lines are folded away for readers and not indexed.
    let code = races.blocks.iter().find(|b| b.kind == BlockKind::Code).map(|b| &races.text[b.start..b.end]);
    let code = code.unwrap_or_else(|| panic!("races.html has code"));
    assert!(code.starts_with("use std::thread;"), "{code:?}");
    assert!(!races.text.contains("#![allow(unused)]"));
}

#[test]
fn nomicon_no_sidebar_or_chrome_leaks() {
    let site = nomicon();
    // Chapter titles of the sidebar, as toc.html lists them (numbering in <strong> removed).
    let toc = std::fs::read_to_string(site.join("toc.html")).unwrap_or_else(|e| panic!("{e}"));
    let toc = scraper::Html::parse_document(&toc);
    let link = scraper::Selector::parse("ol.chapter a").unwrap_or_else(|e| panic!("{e}"));
    let strong = scraper::Selector::parse("strong").unwrap_or_else(|e| panic!("{e}"));
    let titles: Vec<String> = toc
        .select(&link)
        .map(|a| {
            let numbering: String = a.select(&strong).flat_map(|s| s.text()).collect();
            let all: String = a.text().collect();
            normalize_for_match(all.replacen(&numbering, "", 1).trim())
        })
        .filter(|t| !t.is_empty())
        .collect();
    assert!(titles.iter().any(|t| t == "meet safe and unsafe"), "{titles:?}");
    assert!(titles.len() > 40);
    let main_sel = scraper::Selector::parse("main").unwrap_or_else(|e| panic!("{e}"));
    let chrome = [
        "Keyboard shortcuts",
        "to navigate between chapters",
        "Search this book",
        "Print this book",
        "Previous chapter",
        "Toggle Table of Contents",
    ];
    let (_, pages) = nomicon_pages();
    for (src, res) in pages {
        let Extracted::Page(doc) = res else { continue };
        assert_absent(&doc, &chrome);
        let html = std::fs::read_to_string(&src.abs_path).unwrap_or_else(|e| panic!("{e}"));
        let html = scraper::Html::parse_document(&html);
        let main: String = html.select(&main_sel).flat_map(|m| m.text()).collect();
        let main = normalize_for_match(&main);
        let text = normalize_for_match(&doc.text);
        for t in &titles {
            if text.contains(t.as_str()) {
                assert!(main.contains(t.as_str()), "{}: sidebar title {t:?} leaked", doc.path);
            }
        }
        // The book's title lives in the menu bar, outside <main>.
        if !main.contains("the rustonomicon") {
            assert!(!text.contains("the rustonomicon"), "{}: menu title leaked", doc.path);
        }
    }
}

#[derive(serde::Deserialize)]
struct Qrel {
    id: String,
    page: String,
    needle: String,
}

#[test]
fn nomicon_needles_are_in_their_pages_and_never_in_headings() {
    let site = nomicon();
    let qrels = std::fs::read_to_string(fixtures().join("nomicon/qrels.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0;
    for line in qrels.lines().filter(|l| !l.trim().is_empty()) {
        let q: Qrel = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let doc = page(&site, &q.page);
        let needle = normalize_for_match(&q.needle);
        assert!(normalize_for_match(&doc.text).contains(&needle), "{}: needle not in {}", q.id, q.page);
        let mut in_block = false;
        for b in &doc.blocks {
            let block = normalize_for_match(&doc.text[b.start..b.end]);
            if block.contains(&needle) {
                assert!(!matches!(b.kind, BlockKind::Heading(_)), "{}: needle inside a heading", q.id);
                in_block = true;
            }
        }
        assert!(in_block, "{}: needle spans blocks in {}", q.id, q.page);
        n += 1;
    }
    assert_eq!(n, 24);
}

// ---------------------------------------------------------------------------------------------
// (b) One realistic page per generator: exact canonical text, sections, chrome excluded.

#[test]
fn mdbook_page() {
    let site = sites().join("mdbook");
    let doc = page(&site, "getting-started.html");
    assert_eq!(
        doc.text,
        "Getting Started\n\n\
         Install the tool with cargo install demo, then run it\u{a0}once.\n\n\
         Note: the first run downloads the index.\n\n\
         Configuration\n\n\
         Settings live in book.toml:\n\n\
         Key\n\nDefault\n\ntitle\n\nnone\n\nsrc\n\n\"src\"\n\n\
         Example\n\n\
         let config = Config::default();\nprintln!(\"{}\", config.title);\n\n\
         First item\n\n\
         Second item with a line break in the source\n\n\
         1\n\n\
         A footnote."
    );
    assert_eq!(doc.title, "Getting Started");
    assert_eq!(section_of(&doc, "none"), strs(&["Getting Started", "Configuration"]));
    assert_eq!(section_of(&doc, "First item"), strs(&["Getting Started", "Configuration", "Example"]));
    let code: Vec<_> = kinds(&doc).into_iter().filter(|(k, _)| *k == BlockKind::Code).collect();
    assert_eq!(code.len(), 1);
    assert_absent(&doc, &["Demo Book", "Keyboard shortcuts", "Auto", "Navy", "Search this book", "fn main"]);
    // The redirect stub next to it.
    assert_eq!(
        extract_at(&site, "start.html", &opts()).map_err(|e| e.to_string()),
        Ok(Extracted::Skipped("redirect stub (meta refresh to ./getting-started.html)".into()))
    );
}

#[test]
fn sphinx_alabaster_page() {
    let site = sites().join("sphinx");
    let doc = page(&site, "install.html");
    assert_eq!(
        doc.text,
        "Installation\n\n\
         Demo runs on Linux, macOS and Windows.\n\n\
         Requirements\n\n\
         Note\n\n\
         Python\u{a0}3.9 or later is required.\n\n\
         $ pip install demo\n\n\
         Table 1 Supported platforms\n\n\
         Platform\n\nStatus\n\nLinux\n\nsupported\n\n\
         The client\n\n\
         class demo.Client(url)\n\n\
         Connects to a Demo server at url."
    );
    assert_eq!(doc.title, "Installation");
    assert_eq!(section_of(&doc, "supported"), strs(&["Installation", "Requirements"]));
    assert_eq!(section_of(&doc, "class demo.Client(url)"), strs(&["Installation", "The client"]));
    assert_eq!(kinds(&doc)[5], (BlockKind::Code, "$ pip install demo"));
    assert_absent(&doc, &["¶", "[source]", "Navigation", "Related Topics", "Quick search", "Powered by", "Page source", "©"]);
}

#[test]
fn sphinx_read_the_docs_page() {
    let site = sites().join("sphinx");
    let doc = page(&site, "usage.html");
    assert_eq!(
        doc.text,
        "Usage\n\n\
         Call demo.Client with the server URL:\n\n\
         import demo\n\nclient = demo.Client(\"https://example.org\")\n\n\
         Warning\n\n\
         The client is not thread-safe.\n\n\
         Retries\n\n\
         The first retry waits one second.\n\n\
         Each further retry doubles the wait."
    );
    assert_eq!(doc.blocks[2].kind, BlockKind::Code);
    assert_eq!(section_of(&doc, "Each further retry doubles the wait."), strs(&["Usage", "Retries"]));
    assert_absent(&doc, &["View page source", "Previous", "Copyright", "Read the Docs", "Search docs"]);
}

#[test]
fn docusaurus_page() {
    let site = sites().join("docusaurus");
    let doc = page(&site, "docs/installation.html");
    assert_eq!(
        doc.text,
        "Installation\n\n\
         Docusaurus needs Node.js 18.0 or above.\n\n\
         Scaffold a project\n\n\
         npm\n\nYarn\n\n\
         npx create-docusaurus@latest my-website classic\n\n\
         tip\n\n\
         Use the classic template.\n\n\
         Start the site\n\n\
         Run the development server:\n\n\
         cd my-website\nnpm run start\n\n\
         Port already in use?\n\n\
         Pass --port 3001."
    );
    assert_eq!(doc.title, "Installation");
    // The hash-link's zero-width space is gone with it.
    assert_eq!(kinds(&doc)[2], (BlockKind::Heading(2), "Scaffold a project"));
    assert_eq!(section_of(&doc, "cd my-website\nnpm run start"), strs(&["Installation", "Start the site"]));
    assert_absent(
        &doc,
        &[
            "Skip to main content",
            "Tutorial",
            "Version: 2.x",
            "On this page",
            "Edit this page",
            "Last updated",
            "Previous",
            "Deployment",
            "Copyright",
            "yarn create",
            "Copy",
            "\u{200b}",
            "Demo Docs",
        ],
    );
}

#[test]
fn mkdocs_material_page() {
    let site = sites().join("mkdocs");
    let doc = page(&site, "configuration/index.html");
    assert_eq!(
        doc.text,
        "Configuration\n\n\
         All settings live in mkdocs.yml at the project root.\n\n\
         Options\n\n\
         Warning\n\n\
         Unknown keys are an error since version\u{a0}1.6.\n\n\
         YAML\n\nShell\n\n\
         site_name: Demo\nstrict: true\n\n\
         mkdocs build --strict\n\n\
         Key\n\nMeaning\n\nsite_name\n\nShown in the header\n\n\
         Why YAML?\n\n\
         It allows comments."
    );
    assert_eq!(section_of(&doc, "mkdocs build --strict"), strs(&["Configuration", "Options"]));
    assert_absent(
        &doc,
        &[
            "¶",
            "Skip to content",
            "Demo Docs",
            "Table of contents",
            "Home",
            "January 10, 2025",
            "Was this page helpful?",
            "Back to top",
            "Made with",
            "Initializing search",
        ],
    );
}

#[test]
fn mkdocs_builtin_theme_page() {
    let site = sites().join("mkdocs");
    let doc = page(&site, "reference/index.html");
    assert_eq!(
        doc.text,
        "Reference\n\n\
         Commands\n\n\
         mkdocs serve starts a live-reloading server on port\u{a0}8000.\n\n\
         mkdocs serve --dev-addr 127.0.0.1:8000"
    );
    assert_eq!(kinds(&doc)[3].0, BlockKind::Code);
    assert_absent(&doc, &["Demo Docs", "Previous", "Documentation built with", "From here you can search"]);
}

#[test]
fn rustdoc_item_page() {
    // The Rust toolchain's own API docs (rustdoc 1.95.0): the item's declaration and docs,
    // without the item path, the "1.0.0 (const: 1.85.0) · Source" line, the "§" of headings,
    // the "Copy item path" button and the "Expand description" toggle label.
    let doc = page(&sites().join("rustdoc"), "std/mem/fn.swap.html");
    assert_eq!(
        doc.text,
        "Function swap\u{a0}\n\n\
         pub const fn swap<T>(x: &mut T, y: &mut T)\n\n\
         Swaps the values at two mutable locations, without deinitializing either one.\n\n\
         If you want to swap with a default or dummy value, see take.\n\n\
         If you want to swap with a passed value, returning the old value, see replace.\n\n\
         Examples\n\n\
         use std::mem;\n\nlet mut x = 5;\nlet mut y = 42;\n\nmem::swap(&mut x, &mut y);\n\nassert_eq!(42, x);\nassert_eq!(5, y);"
    );
    let code = "use std::mem;\n\nlet mut x = 5;\nlet mut y = 42;\n\nmem::swap(&mut x, &mut y);\n\nassert_eq!(42, x);\nassert_eq!(5, y);";
    assert_eq!(section_of(&doc, code), strs(&["Function swap\u{a0}", "Examples"]));
    assert_absent(&doc, &["std::mem\n", "Source", "1.0.0", "§", "Expand description", "Copy item path"]);
}

#[test]
fn rustdoc_struct_page_without_repeated_sections() {
    // A real rustdoc 1.95.0 struct page (std::ffi::CString): its own methods and trait
    // implementations are content; the methods of `CStr` it derefs to (documented on CStr's own
    // page), the blanket implementations every type's page repeats, the "ⓘ" marks and the "·"
    // left of each method's "1.0.0 · Source" line are not.
    let doc = page(&sites().join("rustdoc"), "std/ffi/struct.CString.html");
    let blocks: Vec<&str> = doc.blocks.iter().map(|b| &doc.text[b.start..b.end]).collect();
    for kept in [
        "Creates a new C-compatible string from a container of bytes.",
        "Converts a CString into a String if it contains valid UTF-8 data.",
        "Auto Trait Implementations",
        "impl Send for CString",
    ] {
        assert!(blocks.contains(&kept), "{kept:?} missing");
    }
    assert_absent(
        &doc,
        &["Methods from Deref", "pub fn to_bytes(&self)", "Blanket Implementations", "Returns the argument unchanged.", "ⓘ"],
    );
    assert!(!blocks.contains(&"·"), "a lone \"·\" block");
    // An impl's `where` clause is a <div> inside its heading: a line of its own, not "…>where".
    let new = "pub fn new<T>(t: T) -> Result<CString, NulError>\nwhere T: Into<Vec<u8>>,";
    assert!(blocks.contains(&new), "no heading {new:?}");
    assert_eq!(
        section_of(&doc, "Creates a new C-compatible string from a container of bytes.").last().map(String::as_str),
        Some("pub fn new<T>(t: T) -> Result<CString, NulError> where T: Into<Vec<u8>>,")
    );
}

#[test]
fn hugo_book_page() {
    let site = sites().join("hugo");
    let doc = page(&site, "docs/deploying/index.html");
    assert_eq!(
        doc.text,
        "Deploying\n\n\
         Run hugo and copy the public/ folder to any static host.\n\n\
         Build the site\n\n\
         hugo --minify\nls public/\n\n\
         Drafts are not built unless you pass --buildDrafts.\n\n\
         Flags\n\n\
         --minify\n\n\
         Minify the output."
    );
    // The mobile header repeats the title in an <h3> inside <main>: the single <article> is the
    // root, so it is not indexed twice.
    assert_eq!(doc.text.matches("Deploying").count(), 1);
    assert_eq!(section_of(&doc, "Minify the output."), strs(&["Deploying", "Build the site", "Flags"]));
    assert_absent(&doc, &["Demo Book", "Introduction", "Edit this page", "Table of Contents"]);
}

#[test]
fn hugo_docsy_page() {
    let site = sites().join("hugo");
    let doc = page(&site, "docs/widgets/index.html");
    assert_eq!(
        doc.text,
        "Configuring Widgets\n\n\
         How to size and style widgets.\n\n\
         Sizes\n\n\
         Widgets come in three sizes: small, medium and large.\n\n\
         Note\n\n\
         Large widgets need a wide screen."
    );
    assert_eq!(section_of(&doc, "Large widgets need a wide screen."), strs(&["Configuring Widgets", "Sizes", "Note"]));
    assert_absent(
        &doc,
        &[
            "Documentation",
            "Feedback",
            "Was this page helpful?",
            "Last modified",
            "Edit this page",
            "All Rights Reserved",
            // The tag list in the article header and the generated child-page index.
            "Tags:",
            "Layout",
            "Small widgets",
            "Widget themes",
        ],
    );
}

#[test]
fn vitepress_page() {
    let site = sites().join("vitepress");
    let doc = page(&site, "guide/getting-started.html");
    assert_eq!(
        doc.text,
        "Getting Started\n\n\
         Gadget is a small library for talking to gadgets over USB.\n\n\
         Installation\n\n\
         Install it from npm:\n\n\
         npm install gadget\n\n\
         First call\n\n\
         import gadget from \"gadget\";\nawait gadget.ping();\n\n\
         TIP\n\n\
         The first call opens the device; later calls reuse it."
    );
    assert_eq!(section_of(&doc, "npm install gadget"), strs(&["Getting Started", "Installation"]));
    // The code blocks' language badges ("bash", "ts"), the permalink marks (a zero-width space),
    // the outline, the sidebar, the pager and the edit link are chrome.
    assert_absent(&doc, &["bash", "\u{200b}", "On this page", "Sidebar Navigation", "Next page", "Edit this page", "MIT License"]);
}

#[test]
fn starlight_page() {
    let site = sites().join("starlight");
    let doc = page(&site, "guides/example/index.html");
    assert_eq!(
        doc.text,
        "Connecting a Sensor\n\n\
         Every probe reads one sensor on its first port.\n\n\
         Wiring\n\n\
         Connect the red wire to 3V3 and the black wire to ground before powering the probe.\n\n\
         Then check it:\n\n\
         probe init\nprobe read --port 1"
    );
    // Expressive Code writes each code line as a <div>: each is a line of the code block.
    assert!(doc.blocks.iter().any(|b| b.kind == BlockKind::Code && &doc.text[b.start..b.end] == "probe init\nprobe read --port 1"));
    assert_eq!(
        section_of(&doc, "Connect the red wire to 3V3 and the black wire to ground before powering the probe."),
        strs(&["Connecting a Sensor", "Wiring"])
    );
    // The page footer inside <main>: edit link, last updated, prev/next, the kudos link.
    assert_absent(
        &doc,
        &[
            "Terminal window",
            "Copy to clipboard",
            "Section titled",
            "Edit page",
            "Last updated",
            "Previous",
            "Setting Up",
            "Built with Starlight",
            "On this page",
        ],
    );
}

#[test]
fn just_the_docs_page() {
    let site = sites().join("just-the-docs");
    let doc = page(&site, "docs/installation/index.html");
    assert_eq!(
        doc.text,
        "Installation\n\n\
         Flowkit runs on Python 3.10 or newer.\n\n\
         With pip\n\n\
         pip install flowkit\n\n\
         From source\n\n\
         Clone the repository and run make install in it."
    );
    assert_eq!(section_of(&doc, "pip install flowkit"), strs(&["Installation", "With pip"]));
    // kramdown's in-page table of contents and its label; the sidebar, search and footer.
    assert_absent(&doc, &["Table of contents", "Back to top", "Copyright", "Edit this page", "Just the Docs", "Search Flowkit"]);
}

#[test]
fn handwritten_page_exercises_every_rule() {
    let site = sites().join("handwritten");
    let doc = page(&site, "index.html");
    assert_eq!(
        doc.text,
        "Field notes\n\n\
         Plain bold, italic&\u{a0}entities: <tag> © — done.\n\n\
         Line one\nLine two\nLine three\n\n\
         Logo: after the image.\n\n\
         Outer start\n\nInner\n\nouter end\n\n\
         Results\n\nName\n\nScore\n\nAnn\n\n12\n\n(best)\n\n\
         indented\n\ttab\tkept\n\nlast line\n\n\
         Details\n\n\
         More\n\nInside details.\n\n\
         Figure 1: a caption\n\n\
         Term\n\nDefinition\n\n\
         Quoted text\n\n\
         Deep\n\nUnder deep.\n\n\
         Back\n\nUnder back.\n\n\
         © 2025 Me"
    );
    assert_eq!(doc.title, "Field notes");
    assert_eq!(section_of(&doc, "Under deep."), strs(&["Field notes", "Details", "Deep"]));
    assert_eq!(section_of(&doc, "Under back."), strs(&["Field notes", "Back"]));
    assert_eq!(section_of(&doc, "© 2025 Me"), strs(&["Field notes", "Back"]));
    assert_absent(&doc, &["comment", "color", "A red logo", "Skip to content", "decorative", "secret draft"]);
    let code: Vec<_> = kinds(&doc).into_iter().filter(|(k, _)| *k == BlockKind::Code).map(|(_, s)| s).collect();
    assert_eq!(code, ["indented\n\ttab\tkept\n\nlast line"]);
}

#[test]
fn handwritten_root_title_and_skips() {
    let site = sites().join("handwritten");
    // Two articles in <main>: no narrowing; no h1: the <title>, whitespace collapsed.
    let doc = page(&site, "two-articles.html");
    assert_eq!(doc.text, "News\n\nFirst story.\n\nSecond story.");
    assert_eq!(doc.title, "Site news");
    assert_eq!(
        extract_at(&site, "nav-only.html", &opts()).map_err(|e| e.to_string()),
        Ok(Extracted::Skipped("no text in the content root <main>".into()))
    );
    assert_eq!(
        extract_at(&site, "moved.html", &opts()).map_err(|e| e.to_string()),
        Ok(Extracted::Skipped("redirect stub (meta refresh to index.html)".into()))
    );
    // A user selector overrides the automatic root; a page without it is skipped.
    let chosen = ExtractOptions { selector: Some("header".into()), ..opts() };
    match extract_at(&site, "two-articles.html", &chosen) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "Site header"),
        other => panic!("{other:?}"),
    }
    let missing = ExtractOptions { selector: Some("#nope".into()), ..opts() };
    assert_eq!(
        extract_at(&site, "two-articles.html", &missing).map_err(|e| e.to_string()),
        Ok(Extracted::Skipped("no element matches the content selector `#nope`".into()))
    );
    let bad = ExtractOptions { selector: Some("main[".into()), ..opts() };
    let err = extract_at(&site, "two-articles.html", &bad).map(|_| ()).map_err(|e| e.to_string());
    assert!(matches!(&err, Err(m) if m.starts_with("two-articles.html: content selector `main[`")), "{err:?}");
}

#[test]
fn markdown_and_text_sources() {
    let site = sites().join("handwritten");
    let md = page(&site, "notes.md");
    assert_eq!(
        md.text,
        "Release notes\n\n\
         Version 2.0 removes the --legacy flag. This line continues the paragraph.\n\n\
         Upgrading\n\n\
         Back up your data.\n\n\
         Run the migration:\n\n\
         demo migrate --to 2.0\n\n\
         Option\n\nDefault\n\njobs\n\n4\n\n\
         Note: the old format is read until 3.0."
    );
    assert_eq!(md.title, "Release notes");
    assert_eq!(section_of(&md, "demo migrate --to 2.0"), strs(&["Release notes", "Upgrading"]));
    assert_eq!(kinds(&md)[5].0, BlockKind::Code);
    let txt = page(&site, "plain.txt");
    assert_eq!(txt.text, "Plain text notes wrapped line\n\nSecond paragraph.");
    assert_eq!(txt.title, "plain");
    assert!(txt.blocks.iter().all(|b| b.kind == BlockKind::Text && b.section.is_empty()));
}

// ---------------------------------------------------------------------------------------------
// (c) Non-ASCII text and legacy encodings.

#[test]
fn unicode_is_kept_verbatim() {
    let site = sites().join("handwritten");
    let doc = page(&site, "unicode.html");
    assert_eq!(
        doc.text,
        "日本語のページ\n\n\
         これは\u{3000}全角スペース（U+3000）を含む文です。\n\n\
         Accents: café, naïve, Ærøskøbing, Ελληνικά, русский.\n\n\
         Emoji: 🦀 crab, 👩\u{200d}💻 coder, 🇫🇷 flag.\n\n\
         No\u{a0}break\u{a0}spaces\u{a0}stay, thin\u{2009}space stays, zero\u{200b}width stays.\n\n\
         عربي mixed with English."
    );
    assert_eq!(doc.title, "日本語のページ");
    // Offsets the browser sees: UTF-16 code units, emoji counting twice.
    let crab = doc.text.find('🦀').unwrap_or_else(|| panic!("crab"));
    let from = byte_to_utf16(&doc.text, crab).unwrap_or_else(|| panic!("boundary"));
    assert_eq!(needle::doc::text::slice_utf16(&doc.text, from, from + 2), Some("🦀"));
}

#[test]
fn windows_1252_page_is_decoded_by_its_meta_charset() {
    let site = sites().join("handwritten");
    let doc = page(&site, "legacy-1252.html");
    assert_eq!(doc.text, "Café menu\n\nCrème brûlée costs €40 – “fresh” daily…\n\nStraße & naïve, 1½\u{a0}kg.");
    assert_eq!(doc.title, "Café menu");
    // Windows-1252 bytes without a declaration are not UTF-8: an error naming the file.
    let bytes = b"<!DOCTYPE html><html><body><main><p>Caf\xe9</p></main></body></html>";
    let err = page_from_bytes("menu.html", bytes).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(err, Err("menu.html: invalid UTF-8 at byte 39 and no charset declared (declare one with <meta charset=\"…\">)".into()));
    // http-equiv form, ISO-8859-1 label (decoded as windows-1252, as browsers do).
    let bytes = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=ISO-8859-1\"></head><body><p>\x93na\xefve\x94</p></body></html>";
    match page_from_bytes("old.html", bytes) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "“naïve”"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn byte_order_marks_win() {
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "<p>Grüße 🦀</p>".encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    match page_from_bytes("bom16.html", &utf16) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "Grüße 🦀"),
        other => panic!("{other:?}"),
    }
    // A UTF-8 BOM beats a wrong declaration.
    let bytes = "\u{feff}<meta charset=\"windows-1252\"><p>Grüße</p>".as_bytes();
    match page_from_bytes("bom8.html", bytes) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "Grüße"),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Malformed, degenerate and hostile input.

#[test]
fn malformed_html_is_repaired_like_a_browser_would() {
    let site = sites().join("handwritten");
    let doc = page(&site, "malformed.html");
    assert_eq!(
        doc.text,
        "Broken page\n\nFirst paragraph\n\nSecond bold both italic after\n\none\n\ntwo\n\ncell one\n\ncell two\n\nunclosed div\n\ninside"
    );
}

#[test]
fn ten_thousand_levels_do_not_overflow_the_stack() {
    let depth = 10_000;
    // Nested blocks: the deepest text is one block.
    let html = format!("<html><body><main>{}deep text{}<p>after</p></main></body></html>", "<div>".repeat(depth), "</div>".repeat(depth));
    match page_from_bytes("deep.html", html.as_bytes()) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "deep text\n\nafter"),
        other => panic!("{other:?}"),
    }
    // Nested inline elements, never closed.
    let html = format!("<body><p>{}x", "<span>a ".repeat(depth));
    match page_from_bytes("inline.html", html.as_bytes()) {
        Ok(Extracted::Page(d)) => {
            assert_eq!(d.blocks.len(), 1);
            assert_eq!(d.text.len(), "a ".len() * depth + 1);
        }
        other => panic!("{other:?}"),
    }
    // Nested lists and quotes, each with text.
    let html = format!("<body>{}", "<blockquote>q<ul><li>i".repeat(depth / 2));
    match page_from_bytes("lists.html", html.as_bytes()) {
        Ok(Extracted::Page(d)) => assert_eq!(d.blocks.len(), depth),
        other => panic!("{other:?}"),
    }
    // Deep Markdown quotes go through pulldown-cmark and the same walker.
    let md = format!("{} deep quote\n", ">".repeat(depth));
    match page_from_bytes("deep.md", md.as_bytes()) {
        Ok(Extracted::Page(d)) => assert_eq!(d.text, "deep quote"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn empty_binary_and_invalid_pages() {
    for (name, bytes) in
        [("empty.html", &b""[..]), ("blank.html", b" \n\t "), ("shell.html", b"<html><head><title>T</title></head><body>  </body></html>")]
    {
        let res = page_from_bytes(name, bytes).map_err(|e| e.to_string());
        assert!(matches!(&res, Ok(Extracted::Skipped(r)) if r.starts_with("no text")), "{name}: {res:?}");
    }
    assert_eq!(page_from_bytes("empty.txt", b"\n\n  \n").map_err(|e| e.to_string()), Ok(Extracted::Skipped("no text".into())));
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    assert_eq!(
        page_from_bytes("logo.html", png).map(|_| ()).map_err(|e| e.to_string()),
        Err("logo.html: binary file (NUL byte at offset 8), not a page".into())
    );
    let err = page_from_bytes("notes.md", b"# Title\n\nbad \xff\xfe byte\n").map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(err, Err("notes.md: invalid UTF-8 at byte 13 (Markdown and text files are read as UTF-8)".into()));
    let err = page_from_bytes("u.html", b"<meta charset=utf-8><p>\xc3</p>").map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(err, Err("u.html: invalid UTF-8 at byte 23 although the page declares UTF-8".into()));
    assert!(matches!(page_from_bytes("u.html", b"<p>\xc3</p>"), Err(ExtractError::Encoding { .. })));
}

// ---------------------------------------------------------------------------------------------
// Discovery.

#[test]
fn discovery_over_the_generator_fixtures() {
    let found = discover(&sites(), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let files: Vec<&str> = found.files.iter().map(|f| f.rel_path.as_str()).collect();
    assert_eq!(
        files,
        [
            // Rooted patterns (`404.html`, `genindex.html`) apply at the site root only.
            "docusaurus/404.html",
            "docusaurus/docs/installation.html",
            "handwritten/index.html",
            "handwritten/legacy-1252.html",
            "handwritten/malformed.html",
            "handwritten/moved.html",
            "handwritten/nav-only.html",
            "handwritten/notes.md",
            "handwritten/plain.txt",
            "handwritten/two-articles.html",
            "handwritten/unicode.html",
            "hostile/code-sample.html",
            "hostile/index.html",
            "hostile/prose.html",
            "hugo/docs/deploying/index.html",
            "hugo/docs/widgets/index.html",
            "just-the-docs/docs/installation/index.html",
            "mdbook/getting-started.html",
            "mdbook/start.html",
            "mkdocs/configuration/index.html",
            "mkdocs/reference/index.html",
            "rustdoc/std/ffi/struct.CString.html",
            "rustdoc/std/mem/fn.swap.html",
            "sphinx/genindex.html",
            "sphinx/install.html",
            "sphinx/usage.html",
            "starlight/guides/example/index.html",
            "vitepress/guide/getting-started.html",
        ]
    );
    assert!(found.files.iter().all(|f| f.abs_path.is_file()));
    assert_eq!(found.files[7].kind, SourceKind::Markdown);
    assert_eq!(found.files[8].kind, SourceKind::Text);
    let excluded: Vec<(&str, &str)> = found.excluded.iter().map(|(p, r)| (p.as_str(), r.as_str())).collect();
    assert_eq!(
        excluded,
        [
            ("mdbook/toc.html", "excluded by pattern `**/toc.html`"),
            ("rustdoc/src/std_detect/detect/bit.rs.html", "excluded by pattern `**/*.rs.html`"),
            ("sphinx/_sources/", "excluded by pattern `**/_sources/**`"),
            ("sphinx/_static/", "excluded by pattern `**/_static/**`"),
        ]
    );
    // Each generator folder as a site of its own.
    let docusaurus = discover(&sites().join("docusaurus"), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let excluded: Vec<&str> = docusaurus.excluded.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(excluded, ["404.html", "assets/"]);
    let sphinx = discover(&sites().join("sphinx"), &opts()).unwrap_or_else(|e| panic!("{e}"));
    let excluded: Vec<&str> = sphinx.excluded.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(excluded, ["_sources/", "_static/", "genindex.html"]);
}

#[test]
fn discovery_rules_on_a_scratch_site() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    for rel in [
        "index.HTML",
        "guide/intro.htm",
        "guide/print.html",
        "guide/notes.markdown",
        "needle/index.json",
        "needle/report.html",
        "node_modules/pkg/README.md",
        "drafts/wip.md",
        "drafts/sub/deeper.html",
        "img/logo.png",
        "style.css",
        "robots.txt",
        "search.html",
    ] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, "<p>x</p>").unwrap_or_else(|e| panic!("{e}"));
    }
    let mut o = opts();
    o.exclude.push("drafts/".into());
    let found = discover(root, &o).unwrap_or_else(|e| panic!("{e}"));
    let files: Vec<(&str, SourceKind)> = found.files.iter().map(|f| (f.rel_path.as_str(), f.kind)).collect();
    assert_eq!(
        files,
        [("guide/intro.htm", SourceKind::Html), ("guide/notes.markdown", SourceKind::Markdown), ("index.HTML", SourceKind::Html)]
    );
    let excluded: Vec<(&str, &str)> = found.excluded.iter().map(|(p, r)| (p.as_str(), r.as_str())).collect();
    assert_eq!(
        excluded,
        [
            ("drafts/", "excluded by pattern `drafts/`"),
            ("guide/print.html", "excluded by pattern `**/print.html`"),
            ("needle/", "excluded by pattern `needle/**`"),
            ("node_modules/", "excluded by pattern `**/node_modules/**`"),
            ("robots.txt", "excluded by pattern `robots.txt`"),
            ("search.html", "excluded by pattern `search.html`"),
        ]
    );
    // Errors name what is wrong.
    let bad = ExtractOptions { exclude: vec!["a/[".into()], ..opts() };
    let err = discover(root, &bad).map(|_| ()).map_err(|e| e.to_string());
    assert!(matches!(&err, Err(m) if m.starts_with("exclude pattern `a/[`")), "{err:?}");
    let err = discover(&root.join("missing"), &opts()).map(|_| ()).map_err(|e| e.to_string());
    assert!(matches!(&err, Err(m) if m.contains("missing: cannot walk the site folder")), "{err:?}");
    let bad = ExtractOptions { selector: Some("div[".into()), ..opts() };
    assert!(matches!(discover(root, &bad), Err(ExtractError::BadSelector { .. })));
}
