//! The language a document is indexed in. In this order: `--lang` for the whole site; the
//! language the page declares (`<html lang>`, `xml:lang`, a `content-language` meta); the file
//! name `page.LANG.html` (content negotiation, as Apache-served manuals ship); a path folder
//! named for a language (`de/`, `ja-JP/`, `zh-cn/`, as i18n generators write); else the
//! language detected from the text (whatlang's trigram statistics).
//!
//! A declaration, file name or folder the text contradicts does not win: when the detector is
//! sure of another language (a reliable detection on at least [`MIN_DETECTED`] letters), the
//! page is indexed in the detected one and the build report says so. A tag that names no known
//! language counts as no declaration. A page nothing places but a detection that is not sure
//! (a short page, a page of code) is [`Source::Guessed`]: the build puts it in the site's main
//! language (`build::read_pages`).

use crate::doc::text::Document;
use crate::query::analyze::{cjk_script, primary, CjkScript, UNDETERMINED};

/// Letters a text needs before its detected language overrules a declaration.
pub const MIN_DETECTED: usize = 200;

/// How a document's language was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Forced,
    Declared,
    FileName,
    Folder,
    Detected,
    /// Nothing declared it, and the detector named a language without being sure of it.
    Guessed,
    /// Nothing declared it and the detector named none: "und".
    Unknown,
}

/// A document's language (a primary subtag, or "und") and how it was decided; `note` says why a
/// declaration was not followed.
#[derive(Debug, Clone, PartialEq)]
pub struct Language {
    pub lang: String,
    pub source: Source,
    pub note: Option<String>,
}

/// The language `doc` is indexed in (module documentation); `forced` is `--lang`.
pub fn resolve(doc: &Document, forced: Option<&str>) -> Language {
    if let Some(f) = forced {
        return Language { lang: primary(f), source: Source::Forced, note: None };
    }
    let detected = detect(&doc.text);
    let sure = detected.as_ref().filter(|d| d.sure);
    let claims = [
        (doc.lang.as_deref().map(primary), Source::Declared, "declares"),
        (file_name_lang(&doc.path), Source::FileName, "is named"),
        (folder_lang(&doc.path), Source::Folder, "is in the folder of"),
    ];
    let mut note = None;
    for (claim, source, how) in claims {
        let Some(claim) = claim else { continue };
        if !is_known(&claim) {
            if source == Source::Declared {
                note = Some(format!("declares the unknown language {:?}", doc.lang.as_deref().unwrap_or_default()));
            }
            continue;
        }
        match sure {
            Some(d) if d.lang != claim && !same_language(&d.lang, &claim) => {
                note = Some(format!("{how} {claim} but reads as {}", d.lang));
                break;
            }
            _ => return Language { lang: claim, source, note },
        }
    }
    match detected {
        Some(d) if d.sure => Language { lang: d.lang, source: Source::Detected, note },
        Some(d) if note.is_none() => Language { lang: d.lang, source: Source::Guessed, note },
        _ => Language { lang: UNDETERMINED.into(), source: Source::Unknown, note },
    }
}

/// The language a query reads as, when the site is in more than one (`langs`) and the detector
/// names one of them; `None` otherwise (the reader's language is then the site's main one).
pub fn of_query(query: &str, langs: &[String]) -> Option<String> {
    if langs.len() < 2 {
        return None;
    }
    let lang = two_letter(whatlang::detect(query)?.lang())?;
    langs.iter().find(|l| *l == lang).cloned()
}

/// Languages the detector may confuse with each other and a declaration settles (Norwegian
/// Bokmål and Danish; Serbian and Croatian; Malay and Indonesian).
fn same_language(a: &str, b: &str) -> bool {
    let pair = |x: &str, y: &str| (a == x && b == y) || (a == y && b == x);
    pair("nb", "da") || pair("no", "da") || pair("nn", "nb") || pair("sr", "hr") || pair("bs", "hr") || pair("ms", "id")
}

/// A detected language, and whether the detector is sure of it.
struct Detected {
    lang: String,
    sure: bool,
}

/// The language of `text` by whatlang, `None` when it names none or one without a two-letter
/// code. Sure when whatlang calls it reliable and the text has [`MIN_DETECTED`] letters.
fn detect(text: &str) -> Option<Detected> {
    // The first 20,000 bytes decide (a long page is not read twice over for it).
    let mut end = text.len().min(20_000);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let sample = &text[..end];
    let letters = Letters::of(sample);
    if let Some(cjk) = cjk_language(&letters) {
        return Some(cjk);
    }
    let info = whatlang::detect(sample)?;
    let lang = two_letter(info.lang())?;
    Some(Detected { lang: lang.to_string(), sure: info.is_reliable() && letters.all >= MIN_DETECTED })
}

/// A text's letters, and those of the scripts the analyzer pairs.
struct Letters {
    all: usize,
    han: usize,
    kana: usize,
    hangul: usize,
}

impl Letters {
    fn of(text: &str) -> Letters {
        let mut l = Letters { all: 0, han: 0, kana: 0, hangul: 0 };
        for c in text.chars().filter(|c| c.is_alphabetic()) {
            l.all += 1;
            match cjk_script(c) {
                Some(CjkScript::Han) => l.han += 1,
                Some(CjkScript::Kana) => l.kana += 1,
                Some(CjkScript::Hangul) => l.hangul += 1,
                None => {}
            }
        }
        l
    }
}

/// Chinese, Japanese or Korean, when a tenth of the text's letters are Han, kana or Hangul: a
/// page of those scripts holds many Latin letters (commands, names, untranslated terms), and a
/// Han character is a word where a Latin letter is a fifth of one, so counting letters (as the
/// trigram detector does) reads such a page as English. Kana make it Japanese, Hangul Korean.
fn cjk_language(letters: &Letters) -> Option<Detected> {
    let Letters { all, han, kana, hangul } = *letters;
    let cjk = han + kana + hangul;
    if cjk * 10 < all || cjk == 0 {
        return None;
    }
    let lang = if hangul * 2 > cjk {
        "ko"
    } else if kana * 10 >= cjk {
        "ja"
    } else {
        "zh"
    };
    Some(Detected { lang: lang.into(), sure: cjk >= MIN_DETECTED / 4 })
}

/// The language of a file named `page.LANG.html` (`index.de.html`, `intro.pt-br.html`).
fn file_name_lang(path: &str) -> Option<String> {
    let name = path.rsplit('/').next()?;
    let mut parts = name.rsplit('.');
    let _ext = parts.next()?;
    let tag = parts.next()?;
    parts.next()?; // a name before the tag
    looks_like_tag(tag).then(|| primary(tag))
}

/// The language of the first folder of `path` named as a language (`de/`, `ja-JP/`, `zh-cn/`,
/// `pt_BR/`); only the first two folders are asked (`docs/de/…`).
fn folder_lang(path: &str) -> Option<String> {
    let mut folders: Vec<&str> = path.split('/').collect();
    folders.pop();
    folders.into_iter().take(2).find(|f| looks_like_tag(f) && is_known(&primary(f))).map(primary)
}

/// A language tag as sites write them in names: a two-letter primary subtag, optionally a region
/// or script (`de`, `de-DE`, `zh-cn`, `zh-Hans`, `pt_BR`).
fn looks_like_tag(s: &str) -> bool {
    let mut parts = s.split(['-', '_']);
    let first = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    first.len() == 2
        && first.bytes().all(|b| b.is_ascii_alphabetic())
        && rest.len() <= 1
        && rest.iter().all(|r| (2..=4).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Whether `lang` (a primary subtag) is a language needle knows a name of: one the detector
/// can tell, or one of the few others documentation is written in.
pub fn is_known(lang: &str) -> bool {
    WHATLANG.iter().any(|(_, two)| *two == lang) || matches!(lang, "no" | "nn" | "ms" | "bs" | "ga" | "eu" | "gl" | "is" | "sq" | "sw")
}

fn two_letter(lang: whatlang::Lang) -> Option<&'static str> {
    let code = lang.code();
    WHATLANG.iter().find(|(three, _)| *three == code).map(|(_, two)| *two)
}

/// whatlang's languages (ISO 639-3) and their ISO 639-1 codes.
const WHATLANG: &[(&str, &str)] = &[
    ("afr", "af"),
    ("aka", "ak"),
    ("amh", "am"),
    ("ara", "ar"),
    ("aze", "az"),
    ("bel", "be"),
    ("ben", "bn"),
    ("bul", "bg"),
    ("cat", "ca"),
    ("ces", "cs"),
    ("cmn", "zh"),
    ("dan", "da"),
    ("deu", "de"),
    ("ell", "el"),
    ("eng", "en"),
    ("epo", "eo"),
    ("est", "et"),
    ("fin", "fi"),
    ("fra", "fr"),
    ("guj", "gu"),
    ("heb", "he"),
    ("hin", "hi"),
    ("hrv", "hr"),
    ("hun", "hu"),
    ("hye", "hy"),
    ("ind", "id"),
    ("ita", "it"),
    ("jav", "jv"),
    ("jpn", "ja"),
    ("kan", "kn"),
    ("kat", "ka"),
    ("khm", "km"),
    ("kor", "ko"),
    ("lat", "la"),
    ("lav", "lv"),
    ("lit", "lt"),
    ("mal", "ml"),
    ("mar", "mr"),
    ("mkd", "mk"),
    ("mya", "my"),
    ("nep", "ne"),
    ("nld", "nl"),
    ("nob", "nb"),
    ("ori", "or"),
    ("pan", "pa"),
    ("pes", "fa"),
    ("pol", "pl"),
    ("por", "pt"),
    ("ron", "ro"),
    ("rus", "ru"),
    ("sin", "si"),
    ("slk", "sk"),
    ("slv", "sl"),
    ("sna", "sn"),
    ("spa", "es"),
    ("srp", "sr"),
    ("swe", "sv"),
    ("tam", "ta"),
    ("tel", "te"),
    ("tgl", "tl"),
    ("tha", "th"),
    ("tuk", "tk"),
    ("tur", "tr"),
    ("ukr", "uk"),
    ("urd", "ur"),
    ("uzb", "uz"),
    ("vie", "vi"),
    ("yid", "yi"),
    ("zul", "zu"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(path: &str, declared: Option<&str>, text: &str) -> Document {
        Document {
            path: path.into(),
            title: "T".into(),
            text: text.into(),
            blocks: Vec::new(),
            source: Default::default(),
            lang: declared.map(Into::into),
        }
    }

    const DE: &str = "Die Paketverwaltung von Debian installiert Programme, aktualisiert sie und entfernt sie wieder. \
        Das Werkzeug apt liest die Liste der Paketquellen, lädt die Pakete herunter und prüft ihre Signaturen, \
        bevor es sie auf dem System einrichtet. Administratoren schätzen diese Verlässlichkeit seit vielen Jahren.";
    const EN: &str = "Debian's package manager installs programs, upgrades them and removes them again. \
        The apt tool reads the list of package sources, downloads the packages and checks their signatures \
        before it sets them up on the system. Administrators have valued this reliability for many years.";

    #[test]
    fn declaration_then_file_name_then_folder_then_detection() {
        assert_eq!(resolve(&doc("a.html", Some("de-DE"), DE), None).source, Source::Declared);
        assert_eq!(resolve(&doc("index.de.html", None, DE), None), Language { lang: "de".into(), source: Source::FileName, note: None });
        assert_eq!(resolve(&doc("de-DE/sect.apt.html", None, DE), None).source, Source::Folder);
        assert_eq!(resolve(&doc("docs/zh-cn/a.html", None, "软件包管理"), None).lang, "zh");
        assert_eq!(resolve(&doc("guide/a.html", None, DE), None), Language { lang: "de".into(), source: Source::Detected, note: None });
        // Too short to be sure: a guess, which the build replaces by the site's main language.
        assert_eq!(resolve(&doc("guide/b.html", None, "Install the package with apt."), None).source, Source::Guessed);
        assert_eq!(resolve(&doc("a.html", Some("en"), DE), Some("fr")).lang, "fr");
        // Folders that are not languages, and names with no tag, are not read as languages.
        assert_eq!(folder_lang("api/index.html"), None);
        assert_eq!(folder_lang("js/app.html"), None);
        assert_eq!(file_name_lang("index.html"), None);
        assert_eq!(file_name_lang("de.html"), None);
    }

    #[test]
    fn chinese_and_japanese_pages_with_latin_words_are_read_as_such() {
        let zh = "使用 apt-get install 命令安装软件包，apt 会自动下载 Debian 软件包及其依赖。".repeat(4);
        assert_eq!(detect(&zh).map(|d| d.lang), Some("zh".into()));
        let ja = "Debian のパッケージは apt-get install コマンドでインストールします。".repeat(4);
        assert_eq!(detect(&ja).map(|d| d.lang), Some("ja".into()));
        // An English page with a Chinese title is English.
        let en = format!("安装 {}", EN);
        assert_eq!(detect(&en).map(|d| d.lang), Some("en".into()));
    }

    #[test]
    fn a_wrong_or_unknown_declaration_gives_way_to_a_sure_detection() {
        let wrong = resolve(&doc("a.html", Some("en"), DE), None);
        assert_eq!((wrong.lang.as_str(), wrong.source), ("de", Source::Detected));
        assert_eq!(wrong.note.as_deref(), Some("declares en but reads as de"));
        let unknown = resolve(&doc("a.html", Some("xx-YY"), EN), None);
        assert_eq!((unknown.lang.as_str(), unknown.source), ("en", Source::Detected));
        assert!(unknown.note.is_some());
        // Too little text to overrule a declaration.
        assert_eq!(resolve(&doc("a.html", Some("de"), "Install the package."), None).lang, "de");
        // Nothing declared and nothing to detect.
        assert_eq!(resolve(&doc("a.html", None, "42"), None).lang, "und");
    }
}
