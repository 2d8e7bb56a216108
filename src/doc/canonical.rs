//! The canonical text rule: the one definition of the text that `#char=` counts in.
//!
//! needle cites an answer as `page#char=from,to`, a range of the page's **canonical text**. That
//! text is built in two places, from two parses of the same page: at index time from the built
//! HTML file (`extract`, through html5ever), and in the browser from the rendered DOM, to
//! highlight the cited range (`www/highlight.js`). Both drive **this module**: each walks its
//! tree in document order, applies steps 1 and 2 below (which need a CSS selector engine, and
//! each side has its own: `scraper` here, `Element.matches` there, given the same selector
//! lists), and hands what is left to a [`Canonicalizer`] as a stream of [`Event`]s. Steps 3–8,
//! where the text is actually made, exist once, here; the browser runs them compiled to
//! WebAssembly (the lexical core, which has no model code). The rule looks at tag names and text
//! nodes only, never at CSS.
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
//!    every code line as a `<div>` with no newline between them). Inside a heading leaf, such
//!    an element ends the current line where it opens and where it closes, as `<br>` does
//!    (rustdoc writes an impl's `where` clause as a `<div>` in its heading).
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
//! # The walkers
//!
//! A walker sends `Open(name)` and `Close(name)` for every element it enters (void elements
//! such as `<br>` included, the content root included) and `Text(data)` for every text node, in
//! document order, and sends nothing for a dropped element's subtree, comments, processing
//! instructions or doctypes. Names are lowercase local names. The browser's walker numbers its
//! text nodes in the order it sends them, and [`Canonical::sources`] answers, for every UTF-16
//! unit of the text, which text node and which unit of it that unit came from: that is what
//! lets it wrap a cited range in `<mark>`s. Walk with an explicit stack (no recursion limit)
//! and never use `innerText` (it applies CSS). Browsers stop nesting elements at depth 512
//! where html5ever does not, so pages nested deeper than that may differ.

use crate::doc::text::{is_space, Block, BlockKind};

/// Where the content is, most specific first (step 1).
pub const CONTENT_ROOT_SELECTORS: &[&str] = &["article.md-content__inner", "main", "[role=main]", "article", "body"];

/// Chrome and invisible content: an element matching any of these is dropped with its subtree
/// (step 2). Every entry is a compound selector (no combinators), so a match depends on
/// the element alone and the browser's walker can use `element.matches(DROP_SELECTORS.join(", "))`.
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
    // rustdoc: the item path above the title, the "1.0.0 · Source" line under it and beside
    // every method, the "§" marks of headings, and the "Expand description" toggle label.
    ".rustdoc-breadcrumbs",
    "span.sub-heading",
    "span.since",
    "a.src",
    "a.doc-anchor",
    "summary.hideme",
    "rustdoc-toolbar",
    // rustdoc item pages: the line beside each method and impl ("1.0.0 · Source", whose
    // version and link are dropped above, leaving a lone "·"); the "ⓘ" mark of notable traits
    // and of examples that are not run (a link to "#" alone); the methods another type's page
    // documents, repeated on every type that derefs to it ("Methods from Deref<Target = [T]>":
    // 447 of the 878 chunks of `Vec`'s page); and the blanket implementations (`From<T> for T`,
    // `Any`, `Borrow`, …), the same list with the same text on every type's page.
    "span.rightside",
    "a.tooltip[href='#']",
    "[id^='deref-methods-']",
    "#blanket-implementations",
    "#blanket-implementations-list",
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

/// Elements that start and end a block (step 3). `h1`–`h6` and [`VERBATIM_ELEMENTS`] are
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

/// Elements whose text is kept verbatim as one `Code` block (step 4).
pub const VERBATIM_ELEMENTS: &[&str] = &["pre", "listing", "xmp", "plaintext"];

/// Version of the rule above and of the chrome lists. Bump whenever any change could alter a
/// page's canonical text: an index built by another extractor is rebuilt, never mixed.
/// 2: hugo-book's `#` permalinks, Docsy's tag list and child-page index, kramdown's in-page
/// TOC (just-the-docs), Starlight's page footer and VitePress's code language badge are chrome;
/// block elements inside `<pre>` end lines (Expressive Code's line `<div>`s).
/// 3: PDFs, CSV tables and caption tracks are documents too (`doc::pdf`, `doc::table`,
/// `doc::media`); rustdoc's chrome (item path, version and source links, `§` marks, the
/// description toggle) is left out, and its source-view pages (`*.rs.html`) are not indexed.
/// 4: rustdoc's repeated sections (methods from `Deref`, blanket implementations) and the "·"
/// beside each method are left out; inside a heading, a block element's edges end a line
/// (rustdoc's `impl<T> Trait for T` + `<div class="where">`, read as `Twhere`).
pub const EXTRACTOR_VERSION: u32 = 4;

/// What a walker hands the rule (see "The walkers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    Open(&'a str),
    Text(&'a str),
    Close(&'a str),
}

/// Where one UTF-16 unit of the canonical text came from: unit `offset` of the `node`-th text
/// node the walker sent (counting from 0). [`Source::SEPARATOR`] for the `"\n"`s the rule adds
/// between lines and pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub node: u32,
    pub offset: u32,
}

impl Source {
    pub const SEPARATOR: Source = Source { node: u32::MAX, offset: 0 };
}

/// The rule's result: the canonical text, its blocks, and (when asked for) the source of every
/// UTF-16 unit of the text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Canonical {
    pub text: String,
    pub blocks: Vec<Block>,
    /// One entry per UTF-16 unit of `text`; empty unless the canonicalizer tracked sources.
    pub sources: Vec<Source>,
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

fn is_block(name: &str) -> bool {
    BLOCK_ELEMENTS.binary_search(&name).is_ok()
}

/// One character of the current piece and where it came from.
#[derive(Debug, Clone, Copy)]
struct Unit {
    c: char,
    src: Source,
}

const fn synthetic(c: char) -> Unit {
    Unit { c, src: Source::SEPARATOR }
}

/// Steps 3–8 over a stream of [`Event`]s.
#[derive(Debug)]
pub struct Canonicalizer {
    out: Canonical,
    track: bool,
    sections: Vec<(u8, String)>,
    /// The current piece: its lines (split at `<br>` outside verbatim leaves). Never empty.
    lines: Vec<Vec<Unit>>,
    /// Elements open now (the walk's depth).
    depth: usize,
    /// The open leaf (heading or verbatim) and the depth its element was opened at.
    leaf: Option<(usize, Mode)>,
    /// Text nodes seen so far: the next one's number.
    nodes: u32,
}

impl Canonicalizer {
    /// `track_sources`: also answer where every unit came from ([`Canonical::sources`]); the
    /// browser needs it to draw a highlight, the indexer does not.
    pub fn new(track_sources: bool) -> Self {
        Canonicalizer {
            out: Canonical::default(),
            track: track_sources,
            sections: Vec::new(),
            lines: vec![Vec::new()],
            depth: 0,
            leaf: None,
            nodes: 0,
        }
    }

    pub fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Open(name) => self.open(name),
            Event::Text(data) => self.text(data),
            Event::Close(name) => self.close(name),
        }
    }

    pub fn text(&mut self, data: &str) {
        let node = self.nodes;
        self.nodes = self.nodes.saturating_add(1);
        let Some(line) = self.lines.last_mut() else { return };
        let mut offset = 0u32;
        for c in data.chars() {
            line.push(Unit { c, src: Source { node, offset } });
            offset += c.len_utf16() as u32;
        }
    }

    pub fn open(&mut self, name: &str) {
        self.depth += 1;
        if self.leaf.is_some() {
            if name == "br" {
                self.line_break();
            } else if is_block(name) {
                self.leaf_line_end();
            }
            return;
        }
        if let Some(level) = heading_level(name) {
            self.flush();
            self.leaf = Some((self.depth, Mode::Heading(level)));
        } else if VERBATIM_ELEMENTS.contains(&name) {
            self.flush();
            self.leaf = Some((self.depth, Mode::Code));
        } else if is_block(name) {
            self.flush();
        } else if name == "br" {
            self.line_break();
        }
    }

    pub fn close(&mut self, name: &str) {
        let depth = self.depth;
        self.depth = self.depth.saturating_sub(1);
        if let Some((leaf_depth, _)) = self.leaf {
            if leaf_depth == depth {
                self.flush();
                self.leaf = None;
            } else if is_block(name) {
                self.leaf_line_end();
            }
            return;
        }
        if is_block(name) {
            self.flush();
        }
    }

    /// The canonical text of everything sent so far.
    pub fn finish(mut self) -> Canonical {
        self.flush();
        self.out
    }

    fn push(&mut self, unit: Unit) {
        if let Some(line) = self.lines.last_mut() {
            line.push(unit);
        }
    }

    fn line_break(&mut self) {
        match self.leaf {
            Some((_, Mode::Code)) => self.push(synthetic('\n')),
            _ => self.lines.push(Vec::new()),
        }
    }

    /// Inside a leaf, a block element's edge ends the line (step 5): a `"\n"` in a verbatim
    /// leaf, a new line (as `<br>` makes) in a heading.
    fn leaf_line_end(&mut self) {
        let last = self.lines.last();
        match self.leaf {
            Some((_, Mode::Code)) if last.and_then(|l| l.last()).is_some_and(|u| u.c != '\n') => self.push(synthetic('\n')),
            Some((_, Mode::Heading(_))) if last.is_some_and(|l| !l.is_empty()) => self.lines.push(Vec::new()),
            _ => {}
        }
    }

    /// Closes the current piece as a block of the current mode, if it has any text (steps 6–8).
    fn flush(&mut self) {
        let mode = self.leaf.map_or(Mode::Text, |(_, m)| m);
        let lines = std::mem::replace(&mut self.lines, vec![Vec::new()]);
        let piece: Vec<Unit> = match mode {
            Mode::Code => {
                let all = lines.concat();
                let a = all.iter().position(|u| !is_space(u.c)).unwrap_or(all.len());
                let z = all.iter().rposition(|u| !is_space(u.c)).map_or(a, |z| z + 1);
                all[a..z.max(a)].to_vec()
            }
            Mode::Text | Mode::Heading(_) => {
                let mut piece = Vec::new();
                for line in lines.iter().map(|l| collapse(l)).filter(|l| !l.is_empty()) {
                    if !piece.is_empty() {
                        piece.push(synthetic('\n'));
                    }
                    piece.extend(line);
                }
                piece
            }
        };
        if piece.is_empty() {
            return;
        }
        if !self.out.text.is_empty() {
            self.emit(&[synthetic('\n'), synthetic('\n')]);
        }
        let start = self.out.text.len();
        self.emit(&piece);
        let end = self.out.text.len();
        let kind = match mode {
            Mode::Text => BlockKind::Text,
            Mode::Code => BlockKind::Code,
            Mode::Heading(level) => {
                while self.sections.last().is_some_and(|(l, _)| *l >= level) {
                    self.sections.pop();
                }
                self.sections.push((level, self.out.text[start..end].replace('\n', " ")));
                BlockKind::Heading(level)
            }
        };
        let section = self.sections.iter().map(|(_, s)| s.clone()).collect();
        self.out.blocks.push(Block { start, end, kind, section });
    }

    fn emit(&mut self, units: &[Unit]) {
        for u in units {
            self.out.text.push(u.c);
            if self.track {
                self.out.sources.push(u.src);
                if u.c.len_utf16() == 2 {
                    let low = if u.src == Source::SEPARATOR { u.src } else { Source { offset: u.src.offset + 1, ..u.src } };
                    self.out.sources.push(low);
                }
            }
        }
    }
}

/// Step 6 on one line: every run of whitespace becomes one U+0020 (sourced at the run's first
/// unit, so a highlight covers it), and the line is trimmed. The same rule as
/// [`crate::doc::text::collapse_spaces`], here with sources.
fn collapse(line: &[Unit]) -> Vec<Unit> {
    let mut out = Vec::with_capacity(line.len());
    let mut space: Option<Unit> = None;
    for u in line {
        if is_space(u.c) {
            if !out.is_empty() && space.is_none() {
                space = Some(Unit { c: ' ', src: u.src });
            }
        } else {
            out.extend(space.take());
            out.push(*u);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::text::{collapse_spaces, slice_utf16};

    fn run(events: &[Event]) -> Canonical {
        let mut c = Canonicalizer::new(true);
        for e in events {
            c.event(*e);
        }
        c.finish()
    }

    #[test]
    fn block_elements_are_sorted_for_binary_search() {
        assert!(BLOCK_ELEMENTS.windows(2).all(|w| w[0] < w[1]));
        assert!(VERBATIM_ELEMENTS.iter().all(|v| is_block(v)));
    }

    #[test]
    fn sources_point_at_the_unit_each_character_came_from() {
        use Event::*;
        let texts = ["  a\u{1F600}b \n c", "d", "x  y"];
        let c = run(&[
            Open("p"),
            Text(texts[0]),
            Open("em"),
            Text(texts[1]),
            Close("em"),
            Close("p"),
            Open("pre"),
            Text(texts[2]),
            Close("pre"),
        ]);
        assert_eq!(c.text, "a\u{1F600}b cd\n\nx  y");
        assert_eq!(c.sources.len(), c.text.encode_utf16().count());
        let units: Vec<u16> = c.text.encode_utf16().collect();
        for (i, s) in c.sources.iter().enumerate() {
            if *s == Source::SEPARATOR {
                assert_eq!(units[i], u16::from(b'\n'), "unit {i}");
                continue;
            }
            let from: Vec<u16> = texts[s.node as usize].encode_utf16().collect();
            let src = from[s.offset as usize];
            // A collapsed run is sourced at its first whitespace unit.
            assert!(src == units[i] || (units[i] == u16::from(b' ') && (src as u8 as char).is_ascii_whitespace()), "unit {i}");
        }
        assert_eq!(slice_utf16(&c.text, 0, 1), Some("a"));
        assert_eq!(collapse_spaces(texts[0]), "a\u{1F600}b c");
    }

    proptest::proptest! {
        /// The collapsing with sources and [`collapse_spaces`] are one rule.
        #[test]
        fn a_text_piece_collapses_as_collapse_spaces_does(s in "[ \t\n\r\x0ca\u{a0}é😀-]{0,40}") {
            let c = run(&[Event::Open("p"), Event::Text(&s), Event::Close("p")]);
            proptest::prop_assert_eq!(c.text, collapse_spaces(&s));
        }
    }

    #[test]
    fn a_leaf_ends_with_its_own_element_whatever_is_inside() {
        use Event::*;
        let c = run(&[Open("h2"), Text("A"), Open("h3"), Text("B"), Close("h3"), Close("h2"), Open("p"), Text("x"), Close("p")]);
        // The inner block is a line of the heading (as the browser shows it), not a heading.
        assert_eq!(c.text, "A\nB\n\nx");
        assert_eq!(c.blocks[0].kind, BlockKind::Heading(2));
        assert_eq!(c.blocks[1].section, vec!["A B".to_string()]);
    }

    #[test]
    fn a_block_inside_a_heading_ends_a_line_and_inline_elements_do_not() {
        use Event::*;
        // rustdoc: `<h3>impl<T> From<T> for T<div class="where">where …</div></h3>`.
        let c = run(&[
            Open("h3"),
            Text("impl Foo for T"),
            Open("div"),
            Text("where T: Copy,"),
            Close("div"),
            Open("span"),
            Text(" x"),
            Close("span"),
            Close("h3"),
        ]);
        assert_eq!(c.text, "impl Foo for T\nwhere T: Copy,\nx");
        assert_eq!(c.blocks[0].section, vec!["impl Foo for T where T: Copy, x".to_string()]);
        // A block at the heading's very start or end adds no empty line.
        let c = run(&[Open("h2"), Open("div"), Text("A"), Close("div"), Text("b"), Open("em"), Text("c"), Close("em"), Close("h2")]);
        assert_eq!(c.text, "A\nbc");
    }
}
