//! Site → canonical text: which files are pages, how they are decoded, and the index-time
//! walker of the canonical text rule ([`crate::doc::canonical`], where the rule is defined):
//! html5ever parses the page, `scraper` applies steps 1–2 (content root, dropped subtrees), and
//! the rest of the page goes to a [`Canonicalizer`] as events, the same events the browser's
//! walker sends from the rendered DOM.
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

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use ego_tree::iter::Edge;
use ego_tree::NodeId;
use encoding_rs::Encoding;
use globset::{GlobBuilder, GlobMatcher};
use scraper::{ElementRef, Html, Node, Selector};

use crate::doc::canonical::{Canonicalizer, CONTENT_ROOT_SELECTORS, DROP_SELECTORS};
use crate::doc::text::{collapse_spaces, Block, BlockKind, Document};

/// `index.html` at any depth: a folder's landing page, which generators often fill with a copy
/// of another page (mdBook's is its first chapter), so that other page keeps the name.
pub fn is_index_page(path: &str) -> bool {
    path == "index.html" || path.ends_with("/index.html")
}

/// How many leading bytes of an HTML file are searched for a charset declaration. The HTML
/// standard's prescan looks at 1024; some generators put a long comment or many `<link>`s
/// first, and a generous window costs nothing for the common UTF-8 page.
pub const PRESCAN_BYTES: usize = 4096;

/// File extensions (lowercase) that are documents; every other file is ignored silently.
pub const PAGE_EXTENSIONS: &[&str] = &["html", "htm", "md", "markdown", "txt", "pdf", "csv", "vtt"];

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
    // rustdoc's source view: each crate's code as a page, not documentation.
    "**/*.rs.html",
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
    /// A PDF ([`crate::doc::pdf`]).
    Pdf,
    /// A CSV table ([`crate::doc::table`]).
    Csv,
    /// WebVTT captions: the document of the media file of the same name next to it
    /// ([`crate::doc::media`]).
    Captions,
}

impl SourceKind {
    /// The kind of a page by its extension (case-insensitive); `None` for anything else.
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "html" | "htm" => Some(SourceKind::Html),
            "md" | "markdown" => Some(SourceKind::Markdown),
            "txt" => Some(SourceKind::Text),
            "pdf" => Some(SourceKind::Pdf),
            "csv" => Some(SourceKind::Csv),
            "vtt" => Some(SourceKind::Captions),
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
    let invalid = |reason: String| ExtractError::Invalid { path: src.rel_path.clone(), reason };
    match src.kind {
        SourceKind::Pdf => return crate::doc::pdf::pdf_document(&src.rel_path, bytes).map(Extracted::Page).map_err(invalid),
        SourceKind::Csv => {
            let title = file_stem(&src.rel_path);
            return Ok(match crate::doc::table::table_document(&src.rel_path, &title, bytes).map_err(invalid)? {
                Some(doc) => Extracted::Page(doc),
                None => Extracted::Skipped("no data record".into()),
            });
        }
        _ => {}
    }
    let text = decode(&src.rel_path, bytes, src.kind)?;
    match src.kind {
        SourceKind::Html => extract_html(&src.rel_path, &text, opts),
        SourceKind::Markdown => Ok(extract_markdown(&src.rel_path, &text)),
        SourceKind::Captions => {
            let Some(media) = captioned_media(src) else {
                return Ok(Extracted::Skipped("captions with no media file of the same name next to them".into()));
            };
            let cues = crate::doc::media::parse_vtt(&text).map_err(invalid)?;
            Ok(Extracted::Page(crate::doc::media::media_document(&media, &file_stem(&media), &cues, None, &[])))
        }
        _ => Ok(extract_text(&src.rel_path, &text)),
    }
}

/// The media file a standalone `.vtt` captions: the one next to it with the same name and a
/// media extension, as a path relative to the site root.
fn captioned_media(src: &SourceFile) -> Option<String> {
    let stem = src.rel_path.rsplit_once('.')?.0;
    crate::doc::media::MEDIA_EXTENSIONS.iter().find(|ext| src.abs_path.with_extension(ext).is_file()).map(|ext| format!("{stem}.{ext}"))
}

/// A media player on a page: `<video>` or `<audio>` with a captions (or subtitles) track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Player {
    /// The media file, relative to the site root.
    pub media: String,
    /// Its captions file, relative to the site root.
    pub captions: String,
    /// The page's heading path above the player.
    pub section: Vec<String>,
}

static PLAYERS: LazyLock<Selector> = LazyLock::new(|| Selector::parse("video, audio").expect("valid CSS"));
static SOURCE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("source[src]").expect("valid CSS"));
static TRACK: LazyLock<Selector> = LazyLock::new(|| Selector::parse("track[src]").expect("valid CSS"));
static HEADING: LazyLock<Selector> = LazyLock::new(|| Selector::parse("h1, h2, h3, h4, h5, h6").expect("valid CSS"));

/// The players of the HTML page `rel_path` (its text) inside its content root, with a local
/// media file and a local captions track (`kind` captions or subtitles; the `default` one,
/// else the first). Remote URLs are not site files and are left out.
pub fn players(rel_path: &str, html: &str, opts: &ExtractOptions) -> Vec<Player> {
    let doc = Html::parse_document(html);
    let root = match &opts.selector {
        Some(sel) => Selector::parse(sel).ok().and_then(|s| doc.select(&s).next()),
        None => automatic_root(&doc),
    };
    let Some(root) = root else { return Vec::new() };
    let mut out = Vec::new();
    let mut open: Vec<(u8, String)> = Vec::new();
    for el in root.descendants().filter_map(ElementRef::wrap) {
        if HEADING.matches(&el) {
            let level = el.value().name().as_bytes().get(1).map_or(6, |b| b - b'0');
            open.retain(|(l, _)| *l < level);
            open.push((level, visible_text(el)));
        } else if PLAYERS.matches(&el) && !el.ancestors().filter_map(ElementRef::wrap).any(|a| DROP.matches(&a)) {
            let src = el.attr("src").or_else(|| el.select(&SOURCE).next().and_then(|s| s.attr("src")));
            let tracks: Vec<ElementRef<'_>> = el
                .select(&TRACK)
                .filter(|t| t.attr("kind").is_none_or(|k| k.eq_ignore_ascii_case("captions") || k.eq_ignore_ascii_case("subtitles")))
                .collect();
            let track = tracks.iter().find(|t| t.attr("default").is_some()).or(tracks.first());
            let (Some(media), Some(captions)) =
                (src.and_then(|s| site_path(rel_path, s)), track.and_then(|t| site_path(rel_path, t.attr("src")?)))
            else {
                continue;
            };
            out.push(Player { media, captions, section: open.iter().map(|(_, t)| t.clone()).filter(|t| !t.is_empty()).collect() });
        }
    }
    out
}

/// A heading's text as the canonical text has it (dropped marks such as permalinks left out).
fn visible_text(el: ElementRef<'_>) -> String {
    let mut text = String::new();
    for node in el.descendants() {
        if let Node::Text(t) = node.value() {
            if !node.ancestors().filter_map(ElementRef::wrap).take_while(|a| a.id() != el.id()).any(|a| DROP.matches(&a)) {
                text.push_str(t);
            }
        }
    }
    collapse_spaces(&text)
}

/// A link's target as a path relative to the site root, resolved against the page
/// `rel_path`; `None` for remote URLs and for paths that leave the site.
pub fn site_path(rel_path: &str, href: &str) -> Option<String> {
    let href = href.trim();
    let href = href.split(['#', '?']).next().unwrap_or_default();
    if href.is_empty() || href.starts_with("//") || href.split('/').next().is_some_and(|first| first.contains(':')) {
        return None;
    }
    let mut parts: Vec<String> = if href.starts_with('/') {
        Vec::new()
    } else {
        rel_path.split('/').map(str::to_string).collect::<Vec<_>>().split_last().map(|(_, dir)| dir.to_vec()).unwrap_or_default()
    };
    for seg in href.split('/') {
        match percent_decode(seg)?.as_str() {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            seg => parts.push(seg.to_string()),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `%XX` escapes of a path segment decoded (as UTF-8); `None` when they are not valid.
pub fn percent_decode(seg: &str) -> Option<String> {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The document of a player's media file from its captions file's bytes: titled by the page
/// that shows it (`host`), its section the heading path above the player.
pub fn hosted_media_document(host: &Document, player: &Player, captions: &[u8]) -> Result<Document, ExtractError> {
    let invalid =
        |reason: String| ExtractError::Invalid { path: player.media.clone(), reason: format!("captions {}: {reason}", player.captions) };
    let text = decode(&player.captions, captions, SourceKind::Captions)?;
    let cues = crate::doc::media::parse_vtt(&text).map_err(invalid)?;
    Ok(crate::doc::media::media_document(&player.media, &host.title, &cues, Some(host.path.clone()), &player.section))
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
    let mut page = finish(rel_path, root, head_title);
    if let Extracted::Page(d) = &mut page {
        d.lang = declared_lang(&doc, root);
    }
    Ok(page)
}

/// The language the content root is declared in: the `lang` (or `xml:lang`) of the root or its
/// nearest ancestor that has one, else a `content-language` meta; `None` when nothing declares
/// one (an empty `lang=""` declares "unknown", which is none).
fn declared_lang(doc: &Html, root: ElementRef<'_>) -> Option<String> {
    let attr = std::iter::once(root).chain(root.ancestors().filter_map(ElementRef::wrap)).find_map(|e| {
        let v = e.value();
        v.attr("lang").or_else(|| v.attr("xml:lang")).map(str::trim)
    });
    let meta = || {
        doc.select(&META)
            .find(|m| m.value().attr("http-equiv").is_some_and(|h| h.eq_ignore_ascii_case("content-language")))
            .and_then(|m| m.value().attr("content"))
            .and_then(|c| c.split(',').next())
            .map(str::trim)
    };
    attr.or_else(meta).filter(|l| !l.is_empty()).map(str::to_string)
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
    Extracted::Page(Document { path: rel_path.to_string(), title, text, blocks, lang: None, source: Default::default() })
}

pub(crate) fn file_stem(rel_path: &str) -> String {
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

/// Steps 2–8 over the subtree of `root`: the dropped subtrees are skipped here, the rest goes
/// to the rule as events. Iterative (ego-tree's traversal keeps no call stack), so arbitrarily
/// deep markup cannot overflow the stack.
fn canonical(root: ElementRef<'_>) -> (String, Vec<Block>) {
    let mut rule = Canonicalizer::new(false);
    let root_id = root.id();
    let mut dropped: Option<NodeId> = None;
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) if dropped.is_none() => match node.value() {
                Node::Text(t) => rule.text(t),
                Node::Element(el) => {
                    if node.id() != root_id && ElementRef::wrap(node).is_some_and(|e| DROP.matches(&e)) {
                        dropped = Some(node.id());
                    } else {
                        rule.open(el.name());
                    }
                }
                _ => {}
            },
            Edge::Open(_) => {}
            Edge::Close(node) => match dropped {
                Some(id) if id == node.id() => dropped = None,
                Some(_) => {}
                None => {
                    if let Node::Element(el) = node.value() {
                        rule.close(el.name());
                    }
                }
            },
        }
    }
    let c = rule.finish();
    (c.text, c.blocks)
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
    Extracted::Page(Document {
        path: rel_path.to_string(),
        title: file_stem(rel_path),
        text,
        blocks,
        lang: None,
        source: Default::default(),
    })
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

    /// The two walkers of the canonical text rule, through the same events: a generated tree
    /// walked as the browser walks its DOM (dropping by the generated element's own tag or
    /// class), and the same tree written as HTML, parsed by html5ever and walked by [`canonical`].
    mod props {
        use super::*;
        use crate::doc::canonical::{Canonical, Event, Source};
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Tree {
            Text(String),
            El { name: &'static str, class: Option<&'static str>, children: Vec<Tree> },
        }

        /// Elements that html5ever nests as written (no implied end tags, no foster parenting)
        /// as long as a heading is not the direct child of a heading and `<pre>`'s first text
        /// does not start with a newline (both avoided below). `nav` and `script` are dropped.
        const NAMES: &[&str] =
            &["div", "section", "blockquote", "span", "em", "code", "b", "pre", "h2", "h3", "br", "nav", "label", "my-tag"];
        /// Classes: two dropped ones, two not.
        const CLASSES: &[&str] = &["headerlink", "sr-only", "note", "boring-not"];

        fn text() -> impl Strategy<Value = Tree> {
            prop::collection::vec(
                prop::sample::select(vec!["a", "b", "cd", " ", "  ", "\n", "\t", "\u{a0}", "é", "\u{1F600}", "&", "<", "x y"]),
                0..6,
            )
            .prop_map(|parts| Tree::Text(parts.concat()))
        }

        fn tree() -> impl Strategy<Value = Tree> {
            text().prop_recursive(5, 48, 5, |inner| {
                (
                    prop::sample::select(NAMES),
                    prop::option::weighted(0.25, prop::sample::select(CLASSES)),
                    prop::collection::vec(inner, 0..5),
                )
                    .prop_map(|(name, class, children)| {
                        let children = if name == "br" { Vec::new() } else { children };
                        Tree::El { name, class, children }
                    })
            })
        }

        fn is_heading(name: &str) -> bool {
            matches!(name, "h2" | "h3")
        }

        /// Rewrites what html5ever would restructure, so that the HTML parses back to this tree.
        fn tame(t: Tree, parent: &str) -> Tree {
            match t {
                Tree::Text(s) if parent == "pre" => Tree::Text(s.trim_start_matches('\n').to_string()),
                Tree::Text(s) => Tree::Text(s),
                Tree::El { name, class, children } => {
                    let name = if is_heading(name) && is_heading(parent) { "span" } else { name };
                    let mut children: Vec<Tree> = children.into_iter().map(|c| tame(c, name)).collect();
                    // Adjacent text nodes are one node once parsed; a newline-led text node
                    // anywhere first in a <pre> would lose that newline.
                    merge_texts(&mut children);
                    Tree::El { name, class, children }
                }
            }
        }

        fn merge_texts(children: &mut Vec<Tree>) {
            let mut out: Vec<Tree> = Vec::new();
            for c in children.drain(..) {
                match (out.last_mut(), c) {
                    (Some(Tree::Text(a)), Tree::Text(b)) => a.push_str(&b),
                    (_, Tree::Text(b)) if b.is_empty() => {}
                    (_, c) => out.push(c),
                }
            }
            *children = out;
        }

        fn html(t: &Tree, out: &mut String) {
            match t {
                Tree::Text(s) => {
                    for c in s.chars() {
                        match c {
                            '&' => out.push_str("&amp;"),
                            '<' => out.push_str("&lt;"),
                            '>' => out.push_str("&gt;"),
                            c => out.push(c),
                        }
                    }
                }
                Tree::El { name, class, children } => {
                    out.push('<');
                    out.push_str(name);
                    if let Some(c) = class {
                        out.push_str(&format!(" class=\"{c}\""));
                    }
                    out.push('>');
                    if *name != "br" {
                        for c in children {
                            html(c, out);
                        }
                        out.push_str(&format!("</{name}>"));
                    }
                }
            }
        }

        /// The DOM walker's side: events straight from the tree; `texts` gets every text node sent.
        fn events<'a>(t: &'a Tree, root: bool, out: &mut Vec<Event<'a>>, texts: &mut Vec<&'a str>) {
            match t {
                Tree::Text(s) => {
                    out.push(Event::Text(s));
                    texts.push(s);
                }
                Tree::El { name, class, children } => {
                    let dropped = matches!(*name, "nav" | "script") || matches!(*class, Some("headerlink" | "sr-only"));
                    if dropped && !root {
                        return;
                    }
                    out.push(Event::Open(name));
                    for c in children {
                        events(c, false, out, texts);
                    }
                    out.push(Event::Close(name));
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
            #[test]
            fn the_html_walker_and_a_dom_walker_give_one_text(children in prop::collection::vec(tree(), 0..6)) {
                let body = tame(Tree::El { name: "body", class: None, children }, "html");
                let mut page = String::from("<!doctype html><html><head></head>");
                html(&body, &mut page);
                page.push_str("</html>");

                let mut evs = Vec::new();
                let mut texts = Vec::new();
                events(&body, true, &mut evs, &mut texts);
                let mut rule = Canonicalizer::new(true);
                for e in &evs {
                    rule.event(*e);
                }
                let dom: Canonical = rule.finish();

                match extract_html("t.html", &page, &ExtractOptions::default()) {
                    Ok(Extracted::Page(doc)) => {
                        prop_assert_eq!(&doc.text, &dom.text, "page {}", page);
                        prop_assert_eq!(&doc.blocks, &dom.blocks);
                    }
                    Ok(Extracted::Skipped(_)) => prop_assert!(dom.text.is_empty(), "skipped, but the DOM walk gives {:?}", dom.text),
                    Err(e) => prop_assert!(false, "{}", e),
                }

                // Every unit of the text is a unit of the text node it names (a collapsed
                // whitespace run shows as one space), or a separator "\n".
                let units: Vec<u16> = dom.text.encode_utf16().collect();
                prop_assert_eq!(units.len(), dom.sources.len());
                for (i, s) in dom.sources.iter().enumerate() {
                    if *s == Source::SEPARATOR {
                        prop_assert_eq!(units[i], u16::from(b'\n'));
                        continue;
                    }
                    let node: Vec<u16> = texts[s.node as usize].encode_utf16().collect();
                    let src = node[s.offset as usize];
                    let ws = |u: u16| matches!(u, 0x20 | 0x09 | 0x0a | 0x0c | 0x0d);
                    prop_assert!(src == units[i] || (units[i] == 0x20 && ws(src)), "unit {} of {:?}", i, dom.text);
                }
            }
        }
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
