//! Site → canonical text.
//!
//! needle cites an answer as `page#char=from,to`, a range of the page's **canonical text**. The
//! text is built twice: here, from the built HTML file, when the index is made; and in the
//! browser, by a script that walks the rendered DOM to highlight the cited range. Both must
//! produce the *same string*, so the rule below is written for a DOM walker, not for a
//! renderer: it looks at tag names, attributes and text nodes only, never at CSS. This comment
//! is the one place the rule is defined; the four public constants it names
//! ([`CONTENT_ROOT_SELECTORS`], [`DROP_SELECTORS`], [`BLOCK_ELEMENTS`], [`VERBATIM_ELEMENTS`])
//! are what a mirror must copy, and [`EXTRACTOR_VERSION`] changes whenever any of it does.
//!
//! # The canonical text rule (HTML)
//!
//! 1. **Content root.** If the user gave a CSS selector, the root is the first element (in
//!    document order) matching it; a page where it matches nothing is skipped. Otherwise, for
//!    each selector of [`CONTENT_ROOT_SELECTORS`] in turn (`article.md-content__inner`, `main`,
//!    `[role=main]`, `article`, `body`), the first element matching it is the root, and the
//!    first selector that matches anything wins. Then, *only for this automatic choice*: if the
//!    root has exactly one `article` descendant (at any depth), the root becomes that article
//!    (Docusaurus, hugo-book and pydata put one `<article>` inside a `<main>` that also holds
//!    the TOC column, the mobile header and the prev/next footer).
//! 2. **Dropped subtrees.** Walking the root's subtree in document order, an element (other
//!    than the root itself) that matches any selector of [`DROP_SELECTORS`] is skipped
//!    together with everything inside it. Comments, processing instructions and doctypes
//!    contribute nothing. Text nodes contribute their data, which the HTML parser has already
//!    entity-decoded. `<img alt>`, `title=`, `aria-label=` and every other attribute contribute
//!    nothing: they are not text the reader sees in the flow (an `alt` is shown only when the
//!    image fails), and a highlight cannot be drawn over them.
//! 3. **Blocks.** An element whose tag name is in [`BLOCK_ELEMENTS`] (`p`, `div`, `li`,
//!    `td`, `th`, `tr`, `dt`, `dd`, `blockquote`, `section`, `figure`, `figcaption`, `header`,
//!    `footer`, `details`, `summary`, `label`, … see the list) *starts and ends* a block: the
//!    text gathered so far is closed as one piece when it opens, and again when it closes.
//!    Nested blocks therefore flatten: `<li>a<ul><li>b</li></ul>c</li>` gives the three pieces
//!    `a`, `b`, `c`. Every other element (`a`, `em`, `code`, `span`, unknown custom elements,
//!    …) is inline: its text just continues the current piece, with no space added
//!    (`foo<b>bar</b>` is `foobar`). Table cells: **each `td`/`th` is its own block** (no
//!    tab-joined rows: a cell may itself hold paragraphs and lists, and a per-cell rule needs
//!    no special case for that).
//! 4. **Leaf blocks.** `h1`–`h6` and the [`VERBATIM_ELEMENTS`] (`pre`, `listing`, `xmp`,
//!    `plaintext`) are leaves: everything inside them, whatever its tag (`div`, `p`, …),
//!    belongs to their one piece, until the leaf element closes; the drop list still applies
//!    inside them. An `h`*N* piece is a `Heading(N)` block, a verbatim piece a `Code` block,
//!    every other piece a `Text` block. A leaf nested in a leaf is part of the outer one.
//! 5. **`<br>`** is a line break: inside a verbatim leaf it is the character `"\n"`; elsewhere
//!    it ends the current *line* of the piece (see 6). Inside a verbatim leaf, an element of
//!    [`BLOCK_ELEMENTS`] also ends a line where it opens and where it closes: a `"\n"` is added
//!    there unless the leaf's text so far is empty or already ends with `"\n"` (a browser shows
//!    each such element on a line of its own; Expressive Code, Starlight's highlighter, writes
//!    every code line as a `<div>` with no newline between them).
//! 6. **Whitespace.** The whitespace set is the browser's collapsing set, ASCII only: U+0020
//!    space, U+0009 tab, U+000A LF, U+000C FF, U+000D CR. U+00A0 NO-BREAK SPACE and every other
//!    Unicode space are ordinary characters and are kept. For a `Text` or `Heading` piece:
//!    each line (the text between two `<br>`) has every run of whitespace replaced by one
//!    U+0020 and is trimmed of whitespace at both ends; empty lines are removed; the remaining
//!    lines are joined with `"\n"`. For a `Code` piece: the text is kept verbatim (the HTML
//!    parser has already removed the single newline that may follow `<pre>`), and only
//!    whitespace at its two ends is trimmed.
//! 7. **Assembly.** Pieces that are empty after step 6 vanish. The canonical text is the
//!    remaining pieces in document order joined by exactly `"\n\n"`; each piece is a
//!    [`Block`]. A `Text`/`Heading` block never contains `"\n\n"`; a `Code` block may.
//! 8. **Sections.** A `Heading(N)` block pops every open heading of level ≥ N and is pushed;
//!    every block's `section` is the list of open heading texts (a heading's own included;
//!    any `"\n"` in a heading text becomes a space there).
//! 9. **Title.** The text of the first `Heading(1)` block; else the `<title>` in `<head>` with
//!    its whitespace collapsed (a title carries a site suffix, hence second choice); else the
//!    file name without its extension.
//!
//! A page holding a `<meta http-equiv="refresh" content="…; url=…">` (anywhere; the keyword
//! and `url` in any case) is a redirect stub, since the browser leaves it at once, and is
//! skipped; so is a page whose canonical text is empty.
//!
//! Mirror notes for the browser: walk with a `TreeWalker`, not `innerText` (which applies CSS);
//! use `/[ \t\n\f\r]+/` rather than `\s` (which includes U+00A0); `element.matches()` accepts
//! every entry of [`DROP_SELECTORS`]. Browsers stop nesting elements at depth 512 where this
//! parser does not, so pages nested deeper than that may differ.
//!
//! # Other sources
//!
//! * **Markdown** (`.md`, `.markdown`) is rendered with pulldown-cmark (tables, footnotes,
//!   strikethrough, task lists, heading attributes, definition lists; YAML/TOML front matter is
//!   not rendered; no smart punctuation, which would change the text) and the result goes
//!   through the HTML rule with the rendered document's `body` as the root; the selector does
//!   not apply.
//! * **Plain text** (`.txt`): line ends are normalised (CRLF and lone CR become LF); a line
//!   holding only whitespace is blank; each run of non-blank lines is one paragraph, a `Text`
//!   block with its whitespace collapsed and trimmed as in step 6; paragraphs are joined by
//!   `"\n\n"`; no sections; the title is the file name. (A browser shows a `.txt` file as one
//!   `<pre>`: the script applies this rule to that element's text.)
//!
//! # Decoding
//!
//! A byte-order mark wins (UTF-8, UTF-16LE/BE). Otherwise a file holding a NUL byte is refused
//! as binary. For HTML the first [`PRESCAN_BYTES`] bytes are prescanned as browsers do for
//! `<meta charset>` and `<meta http-equiv="content-type" content="…charset=…">`; a legacy
//! encoding is decoded with encoding_rs (malformed bytes become U+FFFD, as in a browser). Every
//! other file is UTF-8, and invalid UTF-8 is an error naming the file and the byte offset.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use ego_tree::iter::Edge;
use ego_tree::NodeId;
use encoding_rs::Encoding;
use globset::{GlobBuilder, GlobMatcher};
use scraper::{ElementRef, Html, Node, Selector};

use crate::doc::text::{collapse_spaces, Block, BlockKind, Document};

/// Version of the rule above and of the chrome lists. Bump whenever any change could alter a
/// page's canonical text: an index built by another extractor is rebuilt, never mixed.
/// 2: hugo-book's `#` permalinks, Docsy's tag list and child-page index, kramdown's in-page
/// TOC (just-the-docs), Starlight's page footer and VitePress's code language badge are chrome;
/// block elements inside `<pre>` end lines (Expressive Code's line `<div>`s).
pub const EXTRACTOR_VERSION: u32 = 2;

/// `index.html` at any depth: a folder's landing page, which generators often fill with a copy
/// of another page (mdBook's is its first chapter), so that other page keeps the name.
pub fn is_index_page(path: &str) -> bool {
    path == "index.html" || path.ends_with("/index.html")
}

/// How many leading bytes of an HTML file are searched for a charset declaration. The HTML
/// standard's prescan looks at 1024; some generators put a long comment or many `<link>`s
/// first, and a generous window costs nothing for the common UTF-8 page.
pub const PRESCAN_BYTES: usize = 4096;

/// File extensions (lowercase) that are pages; every other file is ignored silently.
pub const PAGE_EXTENSIONS: &[&str] = &["html", "htm", "md", "markdown", "txt"];

/// The default exclusions, globs relative to the site root in which `*` does not cross `/` and
/// `**/` spans any number of folders. A pattern ending in `/**` excludes a whole folder, which
/// is then not walked at all.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    // mdBook: the whole book on one page, and the sidebar's iframe.
    "print.html",
    "toc.html",
    "**/print.html",
    "**/toc.html",
    // Generated utility pages of mdBook, Sphinx, MkDocs, Docusaurus, Hugo.
    "404.html",
    "search.html",
    "genindex.html",
    "py-modindex.html",
    "searchindex.*",
    // Machine-facing text files at the root: not pages a reader lands on.
    "robots.txt",
    "llms.txt",
    "llms-full.txt",
    // Asset folders. Sphinx's `_sources/` holds every page's reStructuredText as `.txt`,
    // which would index each page twice.
    "**/_static/**",
    "**/_sources/**",
    "assets/**",
    "static/**",
    "**/node_modules/**",
    "**/.git/**",
    // needle's own output folder.
    "needle/**",
];

/// Where the content is, most specific first (rule step 1).
pub const CONTENT_ROOT_SELECTORS: &[&str] = &["article.md-content__inner", "main", "[role=main]", "article", "body"];

/// Chrome and invisible content: an element matching any of these is dropped with its subtree
/// (rule step 2). Every entry is a compound selector (no combinators), so a match depends on
/// the element alone and a DOM mirror can use `element.matches(DROP_SELECTORS.join(", "))`.
///
/// Visually hidden text (`.sr-only`, `.visually-hidden`, `.screen-reader-text`) is dropped on
/// purpose: it is read to screen-reader users but never shown, it is nearly always affordance
/// text ("Copy", "opens in a new tab", "Toggle navigation") rather than prose, and a cited
/// range inside it would highlight nothing the reader can see.
pub const DROP_SELECTORS: &[&str] = &[
    // Not text, or not rendered as text.
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "audio",
    "video",
    // Controls and navigation.
    "button",
    "nav",
    "form",
    "select",
    "textarea",
    "dialog:not([open])",
    // Hidden.
    "[hidden]",
    "[aria-hidden=true]",
    ".sr-only",
    ".visually-hidden",
    ".screen-reader-text",
    // Permalink marks next to headings (Sphinx and MkDocs "¶", Docusaurus, VuePress/VitePress,
    // anchor.js, Docsy).
    ".headerlink",
    ".hash-link",
    ".anchor-link",
    ".anchorjs-link",
    ".header-anchor",
    ".heading-anchor",
    ".td-heading-self-link",
    // hugo-book and Hugo render-heading hooks: `<a class="anchor" href="#id">#</a>`. Only a
    // link to a fragment: Docusaurus puts `class="anchor"` on the heading itself.
    "a.anchor[href^='#']",
    // Tables of contents inside the content (docutils' `contents` directive, Docusaurus,
    // kramdown's `{:toc}` list and just-the-docs' "Table of contents" label above it).
    ".toc",
    ".table-of-contents",
    ".contents.topic",
    "#markdown-toc",
    ".no_toc.text-delta",
    // Generated lists of other pages: Docsy's tags/categories and its child-page index.
    ".taxonomy-terms-article",
    ".section-index",
    // Breadcrumbs, pager, edit/last-updated footers, version badges.
    ".breadcrumbs",
    ".breadcrumb",
    ".pagination-nav",
    ".theme-doc-footer",
    ".theme-doc-toc-mobile",
    ".theme-doc-version-badge",
    ".theme-doc-version-banner",
    ".md-source-file",
    ".md-footer",
    ".md-content__button",
    ".td-page-meta__lastmod",
    // Starlight's page footer: edit link, last updated, prev/next, "Built with Starlight".
    "footer.sl-flex",
    // VitePress's language badge on code blocks ("ts", "bash"), next to its copy button.
    "span.lang",
    // Bootstrap's "not in print" marker: Docsy's feedback widget and sidebars use it.
    ".d-print-none",
    // mdBook's hidden lines of Rust examples (`# fn main() {`), folded away for readers.
    ".boring",
    // Line numbers of Pygments code tables; Sphinx's "[source]"/"[docs]" cross-links.
    ".linenos",
    ".viewcode-link",
    ".viewcode-back",
];

/// Elements that start and end a block (rule step 3). `h1`–`h6` and [`VERBATIM_ELEMENTS`] are
/// blocks too, handled as leaves. `label` is here although HTML renders it inline: in content
/// it is nearly always a tab title (MkDocs Material's content tabs are `<label>`s written with
/// no space between them, which would otherwise glue "YAML" and "Shell" into "YAMLShell").
#[rustfmt::skip]
pub const BLOCK_ELEMENTS: &[&str] = &[
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "dir",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hgroup", "hr", "html", "label", "legend", "li", "listing", "main", "menu", "nav", "ol", "p",
    "plaintext", "pre", "search", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    "xmp",
];

/// Elements whose text is kept verbatim as one `Code` block (rule step 4).
pub const VERBATIM_ELEMENTS: &[&str] = &["pre", "listing", "xmp", "plaintext"];

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: cannot walk the site folder: {reason}")]
    Site { path: PathBuf, reason: String },
    #[error("exclude pattern `{pattern}`: {reason}")]
    BadGlob { pattern: String, reason: String },
    #[error("{path}: content selector `{selector}` is not valid CSS: {reason}")]
    BadSelector { path: String, selector: String, reason: String },
    #[error("{path}: binary file (NUL byte at offset {offset}), not a page")]
    Binary { path: String, offset: usize },
    #[error("{path}: {reason}")]
    Encoding { path: String, reason: String },
    #[error("{path}: {size} bytes, over the page size limit of {limit} bytes (raise it with --max-page-bytes)")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{path}: cannot read: {reason}")]
    Read { path: String, reason: String },
}

/// The default page size limit: a documentation page is rarely over 1 MB of HTML; 16 MiB
/// leaves room for big generated reference pages and keeps one stray dump from stalling a build.
pub const DEFAULT_MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// What to extract and from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractOptions {
    /// CSS selector of the content root; `None` = the automatic choice of rule step 1.
    pub selector: Option<String>,
    /// Globs relative to the site root (see [`DEFAULT_EXCLUDES`] for the syntax). The default
    /// value holds the defaults; a caller adding its own should extend, not replace, them.
    pub exclude: Vec<String>,
    /// Pages larger than this many bytes fail with [`ExtractError::TooLarge`] unread.
    pub max_page_bytes: u64,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            selector: None,
            exclude: DEFAULT_EXCLUDES.iter().map(|s| s.to_string()).collect(),
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    Html,
    Markdown,
    Text,
}

impl SourceKind {
    /// The kind of a page by its extension (case-insensitive); `None` for anything else.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "html" | "htm" => Some(SourceKind::Html),
            "md" | "markdown" => Some(SourceKind::Markdown),
            "txt" => Some(SourceKind::Text),
            _ => None,
        }
    }
}

/// One page file of the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the site root, `/`-separated: what citations name.
    pub rel_path: String,
    pub abs_path: PathBuf,
    pub kind: SourceKind,
}

/// The result of walking a site folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Pages to extract, sorted by `rel_path`.
    pub files: Vec<SourceFile>,
    /// `(rel_path, reason)` of every page file (or whole folder, written with a trailing `/`)
    /// left out, sorted; for the build summary.
    pub excluded: Vec<(String, String)>,
    /// `(rel_path, reason)` of page files the walk could not read (a dangling link, no
    /// permission): the build records them as failed.
    pub unreadable: Vec<(String, String)>,
}

/// What became of one page.
#[derive(Debug, Clone, PartialEq)]
pub enum Extracted {
    Page(Document),
    /// Not content (a redirect stub, no text); the reason is for the build summary.
    Skipped(String),
}

/// The exclusion globs, compiled: every pattern for files, and the `…/**` ones also as
/// folder patterns so that an excluded folder is pruned from the walk.
struct Excludes {
    files: Vec<(String, GlobMatcher)>,
    dirs: Vec<(String, GlobMatcher)>,
}

impl Excludes {
    fn new(patterns: &[String]) -> Result<Self, ExtractError> {
        let compile = |pattern: &str, glob: &str| {
            GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| ExtractError::BadGlob { pattern: pattern.to_string(), reason: e.to_string() })
        };
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        for pattern in patterns {
            // `drafts/` means the folder, as in .gitignore.
            let full = if pattern.ends_with('/') { format!("{pattern}**") } else { pattern.clone() };
            files.push((pattern.clone(), compile(pattern, &full)?));
            if let Some(dir) = full.strip_suffix("/**") {
                if !dir.is_empty() {
                    dirs.push((pattern.clone(), compile(pattern, dir)?));
                }
            }
        }
        Ok(Excludes { files, dirs })
    }

    fn file_match(&self, rel: &str) -> Option<&str> {
        self.files.iter().find(|(_, m)| m.is_match(rel)).map(|(p, _)| p.as_str())
    }

    fn dir_match(&self, rel: &str) -> Option<&str> {
        self.dirs.iter().find(|(_, m)| m.is_match(rel)).map(|(p, _)| p.as_str())
    }
}

/// `/`-joined path of `path` relative to `root`; `None` when a component is not UTF-8.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// Walks `site` (following symlinks; walkdir detects loops) and lists its pages, sorted by
/// relative path, and what the exclusions left out. A folder matching a `…/**` pattern is
/// reported once and not entered. Validates `opts.selector` so a typo fails the build at once.
pub fn discover(site: &Path, opts: &ExtractOptions) -> Result<Discovered, ExtractError> {
    let meta = std::fs::metadata(site).map_err(|e| ExtractError::Site { path: site.to_path_buf(), reason: e.to_string() })?;
    if !meta.is_dir() {
        return Err(ExtractError::Site { path: site.to_path_buf(), reason: "not a folder".into() });
    }
    if let Some(sel) = &opts.selector {
        parse_user_selector(&site.display().to_string(), sel)?;
    }
    let excludes = Excludes::new(&opts.exclude)?;
    let mut out = Discovered::default();
    let mut walk = walkdir::WalkDir::new(site).follow_links(true).sort_by_file_name().into_iter();
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                // One unreadable entry (permissions, a dangling link, a symlink loop) must not
                // sink the build: an unreadable page fails, anything else is left out, both named.
                let rel = e.path().and_then(|p| relative(site, p)).unwrap_or_else(|| site.display().to_string());
                let reason = match (e.io_error(), e.loop_ancestor()) {
                    (_, Some(_)) => "symbolic link loop".to_string(),
                    (Some(io), _) => io.to_string(),
                    _ => e.to_string(),
                };
                let is_page = e.path().and_then(SourceKind::from_path).is_some();
                if is_page {
                    out.unreadable.push((rel, format!("cannot read: {reason}")));
                } else {
                    out.excluded.push((rel, format!("cannot read: {reason}")));
                }
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let Some(rel) = relative(site, entry.path()) else {
            out.excluded.push((entry.path().display().to_string(), "path is not UTF-8".into()));
            if entry.file_type().is_dir() {
                walk.skip_current_dir();
            }
            continue;
        };
        if entry.file_type().is_dir() {
            if let Some(pattern) = excludes.dir_match(&rel) {
                out.excluded.push((format!("{rel}/"), format!("excluded by pattern `{pattern}`")));
                walk.skip_current_dir();
            }
            continue;
        }
        let Some(kind) = SourceKind::from_path(entry.path()) else { continue };
        if let Some(pattern) = excludes.file_match(&rel) {
            out.excluded.push((rel, format!("excluded by pattern `{pattern}`")));
            continue;
        }
        out.files.push(SourceFile { rel_path: rel, abs_path: entry.path().to_path_buf(), kind });
    }
    out.files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
    out.excluded.sort();
    out.unreadable.sort();
    Ok(out)
}

/// Reads a page's bytes, refusing one over `opts.max_page_bytes` without reading it whole
/// (the size is checked on the open file, and the read stops one byte past the limit, so a
/// file that grows meanwhile is caught too).
pub fn read_page(src: &SourceFile, opts: &ExtractOptions) -> Result<Vec<u8>, ExtractError> {
    use std::io::Read;
    let read_err = |e: std::io::Error| ExtractError::Read { path: src.rel_path.clone(), reason: e.to_string() };
    let file = std::fs::File::open(&src.abs_path).map_err(read_err)?;
    let limit = opts.max_page_bytes;
    let too_large = |size: u64| ExtractError::TooLarge { path: src.rel_path.clone(), size, limit };
    let size = file.metadata().map_err(read_err)?.len();
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Extracts one page from its bytes (see the module documentation for the rule).
pub fn extract_file(src: &SourceFile, bytes: &[u8], opts: &ExtractOptions) -> Result<Extracted, ExtractError> {
    let text = decode(&src.rel_path, bytes, src.kind)?;
    match src.kind {
        SourceKind::Html => extract_html(&src.rel_path, &text, opts),
        SourceKind::Markdown => Ok(extract_markdown(&src.rel_path, &text)),
        SourceKind::Text => Ok(extract_text(&src.rel_path, &text)),
    }
}

/// Decodes a page's bytes to text (module documentation, "Decoding").
pub fn decode(rel_path: &str, bytes: &[u8], kind: SourceKind) -> Result<String, ExtractError> {
    let encoding_error = |reason: String| ExtractError::Encoding { path: rel_path.to_string(), reason };
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        let body = bytes.get(bom_len..).unwrap_or_default();
        let text = enc
            .decode_without_bom_handling_and_without_replacement(body)
            .ok_or_else(|| encoding_error(format!("invalid {} after its byte-order mark", enc.name())))?;
        // UTF-16 text legitimately holds NUL bytes, so binary is judged on the decoded text.
        if let Some(offset) = text.find('\0') {
            return Err(ExtractError::Binary { path: rel_path.to_string(), offset: bom_len + offset });
        }
        return Ok(text.into_owned());
    }
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(ExtractError::Binary { path: rel_path.to_string(), offset });
    }
    let declared = if kind == SourceKind::Html { declared_charset(bytes) } else { None };
    match declared {
        Some(enc) if enc == encoding_rs::REPLACEMENT => {
            Err(encoding_error(format!("declares a charset that browsers refuse to decode ({})", enc.name())))
        }
        Some(enc) if enc != encoding_rs::UTF_8 => Ok(enc.decode_without_bom_handling(bytes).0.into_owned()),
        _ => match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) if declared.is_some() => {
                Err(encoding_error(format!("invalid UTF-8 at byte {} although the page declares UTF-8", e.valid_up_to())))
            }
            Err(e) if kind == SourceKind::Html => Err(encoding_error(format!(
                "invalid UTF-8 at byte {} and no charset declared (declare one with <meta charset=\"…\">)",
                e.valid_up_to()
            ))),
            // Markdown and text have no way to declare a charset: they must be UTF-8 (or carry a BOM).
            Err(e) => Err(encoding_error(format!("invalid UTF-8 at byte {} (Markdown and text files are read as UTF-8)", e.valid_up_to()))),
        },
    }
}

/// The encoding an HTML page declares in a `<meta>` within its first [`PRESCAN_BYTES`], as
/// [`decode`] honours it (a byte-order mark, which wins over it, is not looked at here): the
/// HTML standard's "prescan a byte stream to determine its encoding", reduced to what matters
/// for `<meta>`; comments and other tags are skipped so that a `charset=` inside them is not
/// mistaken for a declaration.
pub fn declared_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let b = &bytes[..bytes.len().min(PRESCAN_BYTES)];
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i += 4 + find(&rest[4..], b"-->")? + 3;
        } else if starts_with_ignore_case(rest, b"<meta") && rest.get(5).is_some_and(|&c| is_ws(c) || c == b'/') {
            let (attrs, next) = parse_attributes(b, i + 5);
            i = next;
            if let Some(enc) = meta_encoding(&attrs) {
                // Per the standard: a page cannot declare UTF-16 in ASCII, and x-user-defined
                // means windows-1252.
                return Some(if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                    encoding_rs::UTF_8
                } else if enc == encoding_rs::X_USER_DEFINED {
                    encoding_rs::WINDOWS_1252
                } else {
                    enc
                });
            }
        } else if rest.len() > 1
            && rest[0] == b'<'
            && (rest[1].is_ascii_alphabetic() || (rest[1] == b'/' && rest.get(2).is_some_and(u8::is_ascii_alphabetic)))
        {
            // Another tag: skip its name, then its attributes (whose values may hold `>`).
            let mut j = i + 1;
            while j < b.len() && !is_ws(b[j]) && b[j] != b'>' {
                j += 1;
            }
            i = parse_attributes(b, j).1;
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            i += find(rest, b">")? + 1;
        } else {
            i += 1;
        }
    }
    None
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn starts_with_ignore_case(hay: &[u8], prefix: &[u8]) -> bool {
    hay.len() >= prefix.len() && hay[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Reads attributes from `i` to the end of the tag; returns them (names lowercased) and the
/// index just past the tag's `>` (or the end of the buffer).
fn parse_attributes(b: &[u8], mut i: usize) -> (Vec<(String, String)>, usize) {
    let mut attrs = Vec::new();
    loop {
        while i < b.len() && (is_ws(b[i]) || b[i] == b'/') {
            i += 1;
        }
        if i >= b.len() {
            return (attrs, i);
        }
        if b[i] == b'>' {
            return (attrs, i + 1);
        }
        let start = i;
        while i < b.len() && !is_ws(b[i]) && !matches!(b[i], b'=' | b'>' | b'/') {
            i += 1;
        }
        let name = String::from_utf8_lossy(&b[start..i]).to_ascii_lowercase();
        while i < b.len() && is_ws(b[i]) {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && is_ws(b[i]) {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let quote = b[i];
                let vstart = i + 1;
                let vend = b[vstart..].iter().position(|&c| c == quote).map_or(b.len(), |p| vstart + p);
                value = String::from_utf8_lossy(&b[vstart..vend]).into_owned();
                i = (vend + 1).min(b.len());
            } else {
                let vstart = i;
                while i < b.len() && !is_ws(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                value = String::from_utf8_lossy(&b[vstart..i]).into_owned();
            }
        }
        attrs.push((name, value));
    }
}

fn meta_encoding(attrs: &[(String, String)]) -> Option<&'static Encoding> {
    let get = |name: &str| attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    if let Some(label) = get("charset") {
        return Encoding::for_label(label.trim().as_bytes());
    }
    let is_content_type = get("http-equiv").is_some_and(|v| v.trim().eq_ignore_ascii_case("content-type"));
    if is_content_type {
        return charset_from_content(get("content")?);
    }
    None
}

/// "Extract a character encoding from a meta element": `text/html; charset=windows-1252`.
fn charset_from_content(content: &str) -> Option<&'static Encoding> {
    let lower = content.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find("charset") {
        let after = lower[from + p + 7..].trim_start_matches(|c: char| c.is_ascii_whitespace());
        if let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let label = if let Some(q) = value.strip_prefix(['"', '\'']) {
                q.split(['"', '\'']).next().unwrap_or_default()
            } else {
                value.split(|c: char| c == ';' || c.is_ascii_whitespace()).next().unwrap_or_default()
            };
            return Encoding::for_label(label.as_bytes());
        }
        from += p + 7;
    }
    None
}

static ROOT_SELECTORS: LazyLock<Vec<Selector>> =
    LazyLock::new(|| CONTENT_ROOT_SELECTORS.iter().map(|s| Selector::parse(s).expect("CONTENT_ROOT_SELECTORS are valid CSS")).collect());
static DROP: LazyLock<Selector> = LazyLock::new(|| Selector::parse(&DROP_SELECTORS.join(", ")).expect("DROP_SELECTORS are valid CSS"));
static ARTICLE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("article").expect("valid CSS"));
static BODY: LazyLock<Selector> = LazyLock::new(|| Selector::parse("body").expect("valid CSS"));
static HEAD_TITLE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("head > title").expect("valid CSS"));
static META: LazyLock<Selector> = LazyLock::new(|| Selector::parse("meta[http-equiv]").expect("valid CSS"));
static BLOCKS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| BLOCK_ELEMENTS.iter().copied().collect());

fn parse_user_selector(path: &str, selector: &str) -> Result<Selector, ExtractError> {
    Selector::parse(selector).map_err(|e| ExtractError::BadSelector {
        path: path.to_string(),
        selector: selector.to_string(),
        reason: e.to_string(),
    })
}

/// Extracts an HTML page given as text (rule steps 1–9).
pub(crate) fn extract_html(rel_path: &str, html: &str, opts: &ExtractOptions) -> Result<Extracted, ExtractError> {
    let doc = Html::parse_document(html);
    if let Some(target) = redirect_target(&doc) {
        return Ok(Extracted::Skipped(format!("redirect stub (meta refresh to {target})")));
    }
    let root = match &opts.selector {
        Some(sel) => {
            let selector = parse_user_selector(rel_path, sel)?;
            match doc.select(&selector).next() {
                Some(root) => root,
                None => return Ok(Extracted::Skipped(format!("no element matches the content selector `{sel}`"))),
            }
        }
        None => match automatic_root(&doc) {
            Some(root) => root,
            None => return Ok(Extracted::Skipped("no content root (not even a <body>)".into())),
        },
    };
    let head_title = doc.select(&HEAD_TITLE).next().map(|t| collapse_spaces(&t.text().collect::<String>()));
    Ok(finish(rel_path, root, head_title))
}

fn finish(rel_path: &str, root: ElementRef<'_>, head_title: Option<String>) -> Extracted {
    let (text, blocks) = canonical(root);
    if blocks.is_empty() {
        return Extracted::Skipped(format!("no text in the content root <{}>", root.value().name()));
    }
    let title = blocks
        .iter()
        .find(|b| b.kind == BlockKind::Heading(1))
        .map(|b| text[b.start..b.end].replace('\n', " "))
        .or(head_title.filter(|t| !t.is_empty()))
        .unwrap_or_else(|| file_stem(rel_path));
    Extracted::Page(Document { path: rel_path.to_string(), title, text, blocks })
}

fn file_stem(rel_path: &str) -> String {
    let name = rel_path.rsplit('/').next().unwrap_or(rel_path);
    match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => name.to_string(),
    }
}

/// The URL of a `<meta http-equiv="refresh" content="N; url=…">`, if the page has one.
fn redirect_target(doc: &Html) -> Option<String> {
    doc.select(&META).find_map(|m| {
        let equiv = m.attr("http-equiv")?;
        if !equiv.trim().eq_ignore_ascii_case("refresh") {
            return None;
        }
        let content = m.attr("content")?;
        let at = content.to_ascii_lowercase().find("url")?;
        let rest = content[at + 3..].trim_start();
        let url = rest.strip_prefix('=')?.trim().trim_matches(['"', '\'']);
        Some(url.to_string())
    })
}

/// Rule step 1 without a user selector.
fn automatic_root(doc: &Html) -> Option<ElementRef<'_>> {
    let root = ROOT_SELECTORS.iter().find_map(|s| doc.select(s).next())?;
    let mut articles = root.select(&ARTICLE);
    match (articles.next(), articles.next()) {
        (Some(only), None) => Some(only),
        _ => Some(root),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Text,
    Heading(u8),
    Code,
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// Accumulates pieces into the canonical text (steps 3–8).
struct Builder {
    text: String,
    blocks: Vec<Block>,
    sections: Vec<(u8, String)>,
    /// The current piece: its lines (split at `<br>` outside verbatim leaves). Never empty.
    lines: Vec<String>,
    /// The open leaf element (heading or verbatim), if any.
    leaf: Option<(NodeId, Mode)>,
}

impl Builder {
    fn new() -> Self {
        Builder { text: String::new(), blocks: Vec::new(), sections: Vec::new(), lines: vec![String::new()], leaf: None }
    }

    fn push_text(&mut self, s: &str) {
        if let Some(line) = self.lines.last_mut() {
            line.push_str(s);
        }
    }

    fn line_break(&mut self) {
        match self.leaf {
            Some((_, Mode::Code)) => self.push_text("\n"),
            _ => self.lines.push(String::new()),
        }
    }

    /// Inside a verbatim leaf, a block element's edge ends the line (rule step 5).
    fn code_line_end(&mut self) {
        if let Some((_, Mode::Code)) = self.leaf {
            if self.lines.last().and_then(|l| l.chars().last()).is_some_and(|c| c != '\n') {
                self.push_text("\n");
            }
        }
    }

    fn open(&mut self, id: NodeId, name: &str) {
        if self.leaf.is_some() {
            if name == "br" {
                self.line_break();
            } else if BLOCKS.contains(name) {
                self.code_line_end();
            }
            return;
        }
        if let Some(level) = heading_level(name) {
            self.flush();
            self.leaf = Some((id, Mode::Heading(level)));
        } else if VERBATIM_ELEMENTS.contains(&name) {
            self.flush();
            self.leaf = Some((id, Mode::Code));
        } else if BLOCKS.contains(name) {
            self.flush();
        } else if name == "br" {
            self.line_break();
        }
    }

    fn close(&mut self, id: NodeId, name: &str) {
        if let Some((leaf, _)) = self.leaf {
            if leaf == id {
                self.flush();
                self.leaf = None;
            } else if BLOCKS.contains(name) {
                self.code_line_end();
            }
            return;
        }
        if BLOCKS.contains(name) {
            self.flush();
        }
    }

    /// Closes the current piece as a block of the current mode, if it has any text.
    fn flush(&mut self) {
        let mode = self.leaf.map_or(Mode::Text, |(_, m)| m);
        let lines = std::mem::replace(&mut self.lines, vec![String::new()]);
        let piece = match mode {
            Mode::Code => lines.concat().trim_matches(|c: char| c.is_ascii_whitespace()).to_string(),
            Mode::Text | Mode::Heading(_) => {
                lines.iter().map(|l| collapse_spaces(l)).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
            }
        };
        if piece.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        let start = self.text.len();
        self.text.push_str(&piece);
        let end = self.text.len();
        let kind = match mode {
            Mode::Text => BlockKind::Text,
            Mode::Code => BlockKind::Code,
            Mode::Heading(level) => {
                while self.sections.last().is_some_and(|(l, _)| *l >= level) {
                    self.sections.pop();
                }
                self.sections.push((level, piece.replace('\n', " ")));
                BlockKind::Heading(level)
            }
        };
        let section = self.sections.iter().map(|(_, s)| s.clone()).collect();
        self.blocks.push(Block { start, end, kind, section });
    }
}

/// Steps 2–8 over the subtree of `root`. Iterative (ego-tree's traversal keeps no call stack),
/// so arbitrarily deep markup cannot overflow the stack.
fn canonical(root: ElementRef<'_>) -> (String, Vec<Block>) {
    let mut b = Builder::new();
    let root_id = root.id();
    let mut dropped: Option<NodeId> = None;
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) => {
                if dropped.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(t) => b.push_text(t),
                    Node::Element(el) => {
                        if node.id() != root_id && ElementRef::wrap(node).is_some_and(|e| DROP.matches(&e)) {
                            dropped = Some(node.id());
                            continue;
                        }
                        b.open(node.id(), el.name());
                    }
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if let Some(id) = dropped {
                    if id == node.id() {
                        dropped = None;
                    }
                    continue;
                }
                if let Node::Element(el) = node.value() {
                    b.close(node.id(), el.name());
                }
            }
        }
    }
    b.flush();
    (b.text, b.blocks)
}

/// Markdown → HTML → the HTML rule with the rendered `body` as the root.
fn extract_markdown(rel_path: &str, source: &str) -> Extracted {
    use pulldown_cmark::{html, Options, Parser};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_DEFINITION_LIST
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_PLUSES_DELIMITED_METADATA_BLOCKS;
    let mut rendered = String::with_capacity(source.len() * 3 / 2);
    html::push_html(&mut rendered, Parser::new_ext(source, options));
    let doc = Html::parse_document(&rendered);
    match doc.select(&BODY).next() {
        Some(body) => finish(rel_path, body, None),
        None => Extracted::Skipped("no text".into()),
    }
}

/// Plain text: paragraphs separated by blank lines, whitespace collapsed.
fn extract_text(rel_path: &str, source: &str) -> Extracted {
    let normalised = source.replace("\r\n", "\n").replace('\r', "\n");
    let mut text = String::new();
    let mut blocks = Vec::new();
    let mut paragraph = String::new();
    let emit = |paragraph: &mut String, text: &mut String, blocks: &mut Vec<Block>| {
        let piece = collapse_spaces(paragraph);
        paragraph.clear();
        if piece.is_empty() {
            return;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let start = text.len();
        text.push_str(&piece);
        blocks.push(Block { start, end: text.len(), kind: BlockKind::Text, section: Vec::new() });
    };
    for line in normalised.split('\n') {
        if line.chars().all(|c| c.is_ascii_whitespace()) {
            emit(&mut paragraph, &mut text, &mut blocks);
        } else {
            paragraph.push_str(line);
            paragraph.push('\n');
        }
    }
    emit(&mut paragraph, &mut text, &mut blocks);
    if blocks.is_empty() {
        return Extracted::Skipped("no text".into());
    }
    Extracted::Page(Document { path: rel_path.to_string(), title: file_stem(rel_path), text, blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(html: &str) -> Document {
        match extract_html("t.html", html, &ExtractOptions::default()) {
            Ok(Extracted::Page(doc)) => doc,
            other => panic!("expected a page, got {other:?}"),
        }
    }

    #[test]
    fn constant_selectors_parse() {
        for s in CONTENT_ROOT_SELECTORS.iter().chain(DROP_SELECTORS) {
            assert!(Selector::parse(s).is_ok(), "{s}");
        }
        LazyLock::force(&DROP);
        LazyLock::force(&ROOT_SELECTORS);
    }

    #[test]
    fn drop_selectors_have_no_combinators() {
        for s in DROP_SELECTORS {
            assert!(!s.contains(' ') && !s.contains('>') && !s.contains('+') && !s.contains('~'), "{s}");
        }
    }

    #[test]
    fn block_elements_inside_pre_end_lines() {
        // Expressive Code (Starlight): one <div> per line, no newline text between them; an
        // empty line holds a "\n" of its own.
        let d = page(concat!(
            "<body><pre><code>",
            r#"<div class="ec-line"><div class="code"><span>f(</span></div></div>"#,
            r#"<div class="ec-line"><div class="code"><span class="indent">  </span>x,</div></div>"#,
            r#"<div class="ec-line"><div class="code">"#,
            "\n</div></div>",
            r#"<div class="ec-line"><div class="code">)</div></div>"#,
            "</code></pre></body>"
        ));
        assert_eq!(d.text, "f(\n  x,\n\n)");
        // Text before and after a block inside <pre>; lines that already end in "\n" get no other.
        assert_eq!(page("<body><pre>a<div>b</div>c</pre></body>").text, "a\nb\nc");
        assert_eq!(page("<body><pre>a\n<p>b\n</p>c</pre></body>").text, "a\nb\nc");
        // Inline elements inside <pre> still add nothing.
        assert_eq!(page("<body><pre><span>a</span><span>b</span></pre></body>").text, "ab");
    }

    #[test]
    fn inline_text_joins_and_blocks_split() {
        let d = page("<body><p>foo<b>bar</b>  baz\n qux</p><div>a<div>b</div>c</div></body>");
        assert_eq!(d.text, "foobar baz qux\n\na\n\nb\n\nc");
    }

    #[test]
    fn br_makes_lines_and_pre_is_verbatim() {
        let d = page("<body><p> one <br> two<br><br></p><pre>\n  x = 1\n\n  y<br>z  \n</pre></body>");
        assert_eq!(d.text, "one\ntwo\n\nx = 1\n\n  y\nz");
        assert_eq!(d.blocks[1].kind, BlockKind::Code);
    }

    #[test]
    fn sections_pop_levels() {
        let d = page("<body><h1>A</h1><h2>B</h2><p>x</p><h3>C</h3><h2>D</h2><p>y</p></body>");
        let last = d.blocks.last().map(|b| b.section.clone());
        assert_eq!(last, Some(vec!["A".to_string(), "D".to_string()]));
        assert_eq!(d.title, "A");
    }

    #[test]
    fn prescan_finds_both_declaration_forms() {
        assert_eq!(declared_charset(b"<!doctype html><meta charset=\"windows-1252\">"), Some(encoding_rs::WINDOWS_1252));
        assert_eq!(
            declared_charset(b"<html><head><meta http-equiv=Content-Type content='text/html; charset=ISO-8859-1'>"),
            Some(encoding_rs::WINDOWS_1252)
        );
        assert_eq!(declared_charset(b"<!-- <meta charset=latin1> --><p>"), None);
        assert_eq!(declared_charset(b"<meta charset=utf-16>"), Some(encoding_rs::UTF_8));
        assert_eq!(declared_charset(b"<a title='<meta charset=latin1>'>"), None);
    }

    #[test]
    fn excludes_prune_folders_and_match_nested_files() {
        let ex = match Excludes::new(&ExtractOptions::default().exclude) {
            Ok(ex) => ex,
            Err(e) => panic!("{e}"),
        };
        assert!(ex.file_match("print.html").is_some());
        assert!(ex.file_match("guide/print.html").is_some());
        assert!(ex.file_match("searchindex.js").is_some());
        assert!(ex.file_match("guide/search.html").is_none());
        assert!(ex.dir_match("_static").is_some());
        assert!(ex.dir_match("docs/_static").is_some());
        assert!(ex.dir_match("needle").is_some());
        assert!(ex.dir_match("guide/needle").is_none());
        assert!(ex.file_match("intro.html").is_none());
    }

    #[test]
    fn text_files_are_paragraphs() {
        let Extracted::Page(d) = extract_text("notes/readme.txt", "  Hello\r\n  world \r\n \t\r\nsecond\tpara\n\n\n") else {
            panic!("page expected")
        };
        assert_eq!(d.text, "Hello world\n\nsecond para");
        assert_eq!(d.title, "readme");
    }
}
