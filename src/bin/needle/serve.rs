//! `needle serve SITE`: a small static file server on 127.0.0.1 for previews and tests.
//! Invariants: it never serves a file outside the root (no `..`, no symlink escape); `.wasm`
//! goes out as `application/wasm` (streaming compilation needs it); content-hashed names are
//! cached as immutable, everything else is revalidated; with `csp` every response carries a
//! strict Content-Security-Policy that the widget and the engine must live with. A single
//! `Range: bytes=…` is answered with 206 and just those bytes (a media element seeks that way).

use needle::build::bundle::is_hashed_name;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The policy sent with `--csp`: no inline script, no eval; WebAssembly compilation allowed.
pub const STRICT_CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{root}: not a folder")]
    NotAFolder { root: PathBuf },
    #[error("cannot listen on 127.0.0.1:{port}: {cause}")]
    Bind { port: u16, cause: std::io::Error },
    #[error("accepting a connection: {0}")]
    Accept(std::io::Error),
}

/// A bound server, not yet answering; `port()` is the real port (useful with port 0).
pub struct Server {
    listener: TcpListener,
    root: PathBuf,
    csp: bool,
}

impl Server {
    pub fn bind(root: &Path, port: u16, csp: bool) -> Result<Server, ServeError> {
        let root = root.canonicalize().ok().filter(|r| r.is_dir()).ok_or_else(|| ServeError::NotAFolder { root: root.to_path_buf() })?;
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|cause| ServeError::Bind { port, cause })?;
        Ok(Server { listener, root, csp })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Answers forever, one thread per connection.
    pub fn run(self) -> Result<(), ServeError> {
        for stream in self.listener.incoming() {
            let stream = stream.map_err(ServeError::Accept)?;
            let root = self.root.clone();
            let csp = self.csp;
            std::thread::spawn(move || {
                let _ = handle(stream, &root, csp);
            });
        }
        Ok(())
    }
}

/// Serves `root` on 127.0.0.1:`port` until the process ends.
pub fn serve(root: &Path, port: u16, csp: bool) -> Result<(), ServeError> {
    let server = Server::bind(root, port, csp)?;
    eprintln!("serving {} at http://127.0.0.1:{}/{}", server.root.display(), server.port(), if csp { " (strict CSP)" } else { "" });
    server.run()
}

/// The Content-Type for a file: [`mime_type`], except that an HTML page which declares its own
/// charset in a `<meta>` (found as the extractor finds it) is sent as plain `text/html`, so the
/// browser decodes it by that declaration, as the extractor did; an HTTP `charset=utf-8` would
/// override it and turn a windows-1252 page's "é" into "�" in the browser only.
pub fn content_type(path: &Path, body: &[u8]) -> String {
    let mime = mime_type(path);
    if mime.starts_with("text/html") && needle::doc::extract::declared_charset(body).is_some() {
        return "text/html".to_string();
    }
    mime.to_string()
}

pub fn mime_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("ico") => "image/x-icon",
        Some("webp") => "image/webp",
        Some("woff") => "font/woff",
        Some("woff2") => "font/woff2",
        Some("ttf") => "font/ttf",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        Some("xml") => "application/xml",
        Some("pdf") => "application/pdf",
        Some("csv") => "text/csv; charset=utf-8",
        Some("vtt") => "text/vtt; charset=utf-8",
        Some("webm") => "video/webm",
        Some("ogv") => "video/ogg",
        Some("ogg" | "oga" | "opus") => "audio/ogg",
        Some("mp4" | "m4v") => "video/mp4",
        Some("m4a") => "audio/mp4",
        Some("mp3") => "audio/mpeg",
        _ => "application/octet-stream",
    }
}

fn handle(mut stream: TcpStream, root: &Path, csp: bool) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let mut keep_alive = parts.next() == Some("HTTP/1.1");
        let mut content_length = 0usize;
        let mut range = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "connection" {
                    keep_alive = !v.eq_ignore_ascii_case("close");
                } else if k == "content-length" {
                    content_length = v.parse().unwrap_or(0);
                } else if k == "range" {
                    range = Some(v.to_string());
                }
            }
        }
        if content_length > 0 {
            std::io::copy(&mut (&mut reader).take(content_length as u64), &mut std::io::sink())?;
        }
        let response = respond(method, target, range.as_deref(), root, csp);
        write_response(&mut stream, &response, method == "HEAD", keep_alive)?;
        if !keep_alive {
            let _ = stream.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

struct Response {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn respond(method: &str, target: &str, range: Option<&str>, root: &Path, csp: bool) -> Response {
    let mut r = if method != "GET" && method != "HEAD" {
        plain("405 Method Not Allowed", "only GET and HEAD")
    } else {
        match resolve(root, target) {
            Some(path) => match std::fs::read(&path) {
                Ok(body) => {
                    let cache = if is_hashed_name(&path) { "public, max-age=31536000, immutable" } else { "no-cache" };
                    let mut headers = vec![("Content-Type", content_type(&path, &body)), ("Cache-Control", cache.to_string())];
                    // needle's service worker may control the whole site (offline visits).
                    if path.file_name().is_some_and(|n| n == "needle-sw.js") {
                        headers.push(("Service-Worker-Allowed", "/".to_string()));
                    }
                    headers.push(("Accept-Ranges", "bytes".to_string()));
                    let len = body.len();
                    match range.map(|r| byte_range(r, len)) {
                        Some(Some(Ok((a, z)))) => {
                            headers.push(("Content-Range", format!("bytes {a}-{z}/{len}")));
                            Response { status: "206 Partial Content", headers, body: body[a..=z].to_vec() }
                        }
                        Some(Some(Err(()))) => {
                            let mut r = plain("416 Range Not Satisfiable", "range not satisfiable");
                            r.headers.push(("Content-Range", format!("bytes */{len}")));
                            r
                        }
                        // No range, or one this server does not split (several ranges): all of it.
                        _ => Response { status: "200 OK", headers, body },
                    }
                }
                Err(_) => plain("404 Not Found", "not found"),
            },
            None => plain("404 Not Found", "not found"),
        }
    };
    r.headers.push(("X-Content-Type-Options", "nosniff".into()));
    if csp {
        r.headers.push(("Content-Security-Policy", STRICT_CSP.into()));
    }
    r
}

fn plain(status: &'static str, text: &str) -> Response {
    Response { status, headers: vec![("Content-Type", "text/plain; charset=utf-8".into())], body: format!("{text}\n").into_bytes() }
}

/// A `Range` header against a body of `len` bytes: `None` when it is not one single byte range
/// (then the whole body is sent), else the first and last byte, or `Err` when it asks for
/// nothing the body has (RFC 9110 §14.1.2: `a-b`, `a-`, `-suffix`).
fn byte_range(header: &str, len: usize) -> Option<Result<(usize, usize), ()>> {
    let spec = header.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None;
    }
    let (a, z) = spec.split_once('-')?;
    let (a, z) = (a.trim(), z.trim());
    let range = if a.is_empty() {
        let suffix: usize = z.parse().ok()?;
        (suffix > 0 && len > 0).then(|| (len - suffix.min(len), len - 1))
    } else {
        let a: usize = a.parse().ok()?;
        let z: usize = if z.is_empty() { usize::MAX } else { z.parse().ok()? };
        (a <= z && a < len).then(|| (a, z.min(len - 1)))
    };
    Some(range.ok_or(()))
}

/// Maps a request target to a file under `root`: percent-decoded, query and fragment dropped,
/// folders to their `index.html`; `None` for anything that would leave the root.
fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let decoded = percent_decode(path)?;
    let mut out = root.to_path_buf();
    for comp in Path::new(decoded.trim_start_matches('/')).components() {
        match comp {
            Component::Normal(c) => out.push(c),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if out.is_dir() {
        out.push("index.html");
    }
    let real = out.canonicalize().ok()?;
    (real.starts_with(root) && real.is_file()).then_some(real)
}

/// A request target's `%XX` escapes decoded (the extractor's decoding of link paths); a NUL is
/// refused, as no file name holds one.
fn percent_decode(s: &str) -> Option<String> {
    needle::doc::extract::percent_decode(s).filter(|s| !s.contains('\0'))
}

fn write_response(stream: &mut TcpStream, r: &Response, head: bool, keep_alive: bool) -> std::io::Result<()> {
    let mut h = format!("HTTP/1.1 {}\r\nContent-Length: {}\r\n", r.status, r.body.len());
    for (k, v) in &r.headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str(if keep_alive { "Connection: keep-alive\r\n\r\n" } else { "Connection: close\r\n\r\n" });
    stream.write_all(h.as_bytes())?;
    if !head {
        stream.write_all(&r.body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(port: u16, path: &str) -> (String, Vec<u8>) {
        get_range(port, path, None)
    }

    fn get_range(port: u16, path: &str, range: Option<&str>) -> (String, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{range}Connection: close\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (String::from_utf8_lossy(&buf[..split]).into_owned(), buf[split + 4..].to_vec())
    }

    #[test]
    fn serves_files_with_their_types_and_never_leaves_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        std::fs::create_dir_all(site.join("needle")).unwrap();
        std::fs::write(site.join("index.html"), "<p>hi</p>").unwrap();
        std::fs::write(site.join("needle/core.0123456789abcdef.wasm"), b"\0asm").unwrap();
        std::fs::write(site.join("a b.txt"), "spaced").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        let server = Server::bind(&site, 0, true).unwrap();
        let port = server.port();
        std::thread::spawn(move || server.run());

        std::fs::write(site.join("legacy.html"), b"<meta charset=\"windows-1252\"><p>caf\xe9</p>").unwrap();
        let (h, body) = get(port, "/");
        assert!(h.starts_with("HTTP/1.1 200"), "{h}");
        assert!(h.contains("Content-Type: text/html; charset=utf-8") && h.contains("Cache-Control: no-cache"), "{h}");
        // A page that declares its charset is decoded by its declaration, as the extractor did.
        let (legacy, _) = get(port, "/legacy.html");
        assert!(legacy.contains("Content-Type: text/html\r\n"), "{legacy}");
        assert!(h.contains("script-src 'self' 'wasm-unsafe-eval'"));
        assert_eq!(body, b"<p>hi</p>");

        let (h, body) = get(port, "/needle/core.0123456789abcdef.wasm?v=1");
        assert!(h.contains("Content-Type: application/wasm") && h.contains("immutable"), "{h}");
        assert_eq!(body, b"\0asm");
        assert_eq!(get(port, "/a%20b.txt").1, b"spaced");

        for bad in ["/../secret.txt", "/needle/../../secret.txt", "/%2e%2e/secret.txt", "/nope.html"] {
            assert!(get(port, bad).0.starts_with("HTTP/1.1 404"), "{bad}");
        }
    }

    #[test]
    fn serves_media_and_documents_with_their_types_and_byte_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path();
        let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for f in ["tour.webm", "talk.ogg", "talk.opus", "clip.ogv", "clip.mp4", "song.mp3", "tour.vtt", "manual.pdf", "t.csv"] {
            std::fs::write(site.join(f), &body).unwrap();
        }
        let server = Server::bind(site, 0, false).unwrap();
        let port = server.port();
        std::thread::spawn(move || server.run());

        for (f, t) in [
            ("tour.webm", "video/webm"),
            ("talk.ogg", "audio/ogg"),
            ("talk.opus", "audio/ogg"),
            ("clip.ogv", "video/ogg"),
            ("clip.mp4", "video/mp4"),
            ("song.mp3", "audio/mpeg"),
            ("tour.vtt", "text/vtt"),
            ("manual.pdf", "application/pdf"),
            ("t.csv", "text/csv"),
        ] {
            let (h, b) = get(port, &format!("/{f}"));
            assert!(
                h.starts_with("HTTP/1.1 200") && h.contains(&format!("Content-Type: {t}")) && h.contains("Accept-Ranges: bytes"),
                "{f}: {h}"
            );
            assert_eq!(b, body);
        }
        // What a media element asks for when it starts and when it seeks.
        for (range, a, z) in [("bytes=0-", 0, 999), ("bytes=100-199", 100, 199), ("bytes=900-5000", 900, 999), ("bytes=-10", 990, 999)] {
            let (h, b) = get_range(port, "/tour.webm", Some(range));
            assert!(h.starts_with("HTTP/1.1 206 Partial Content"), "{range}: {h}");
            assert!(
                h.contains(&format!("Content-Range: bytes {a}-{z}/1000")) && h.contains(&format!("Content-Length: {}", z - a + 1)),
                "{range}: {h}"
            );
            assert_eq!(b, &body[a..=z], "{range}");
        }
        let (h, _) = get_range(port, "/tour.webm", Some("bytes=1000-"));
        assert!(h.starts_with("HTTP/1.1 416") && h.contains("Content-Range: bytes */1000"), "{h}");
        // Several ranges or another unit: the whole file.
        for range in ["bytes=0-1,5-9", "items=0-1"] {
            let (h, b) = get_range(port, "/tour.webm", Some(range));
            assert!(h.starts_with("HTTP/1.1 200"), "{range}: {h}");
            assert_eq!(b, body);
        }
    }

    #[test]
    fn hashed_names_are_recognised() {
        assert!(is_hashed_name(Path::new("needle_core.0123456789abcdef.wasm")));
        assert!(!is_hashed_name(Path::new("needle.js")));
        assert!(!is_hashed_name(Path::new("widget.js")));
    }
}
