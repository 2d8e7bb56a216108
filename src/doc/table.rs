//! CSV (RFC 4180) → the canonical text of a table: one line per data record, its fields with
//! whitespace collapsed (a line break inside a quoted field becomes a space) and joined by
//! `" | "`. The header record is not in the text: it is every chunk's section, so it is embedded
//! with each chunk (strategies E and F) and shown, never quoted. Rows are numbered as RFC 7111
//! counts them, the header record being row 1, so a chunk is cited `table.csv#row=a-b`.
//!
//! A file that the `csv` crate cannot read as RFC 4180 (unbalanced quotes are tolerated by it;
//! invalid UTF-8 is not) is an error naming the record; a table with no data record is skipped.

use crate::doc::locator::Source;
use crate::doc::text::{collapse_spaces, Block, BlockKind, Document};

/// Separates a record's fields in the canonical text.
pub const FIELD_SEPARATOR: &str = " | ";

/// The document of the CSV file `path` (its bytes, UTF-8), titled `title`; `Ok(None)` when it
/// has no data record.
pub fn table_document(path: &str, title: &str, bytes: &[u8]) -> Result<Option<Document>, String> {
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(bytes);
    let mut records = reader.records();
    let line = |r: &csv::StringRecord| r.iter().map(collapse_spaces).collect::<Vec<_>>().join(FIELD_SEPARATOR);
    let header = match records.next() {
        None => return Ok(None),
        Some(r) => line(&r.map_err(|e| format!("header record: {e}"))?),
    };
    let section = vec![header];
    let mut text = String::new();
    let mut blocks = Vec::new();
    let mut rows = Vec::new();
    for (i, record) in records.enumerate() {
        let row = i as u32 + 2;
        let record = record.map_err(|e| format!("row {row}: {e}"))?;
        let fields = line(&record);
        if fields.replace(FIELD_SEPARATOR.trim(), "").trim().is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let start = text.len();
        text.push_str(&fields);
        blocks.push(Block { start, end: text.len(), kind: BlockKind::Text, section: section.clone() });
        rows.push((start..text.len(), row));
    }
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(Document { path: path.to_string(), title: title.to_string(), text, blocks, lang: None, source: Source::Table { rows } }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::locator::Locator;

    #[test]
    fn records_become_lines_numbered_as_rfc_7111_counts_rows() {
        let csv = b"name,port,note\r\nssh,22,\"Secure Shell, remote login\"\r\n,,\r\nntp,123,\"say \"\"time\"\"\nover UDP\"\r\n";
        let doc = table_document("data/ports.csv", "ports", csv).unwrap().unwrap();
        assert_eq!(doc.text, "ssh | 22 | Secure Shell, remote login\nntp | 123 | say \"time\" over UDP");
        assert_eq!(doc.blocks[0].section, vec!["name | port | note".to_string()]);
        // The header is row 1, the empty record row 3.
        assert_eq!(doc.source.locate(0, doc.text.len()), Locator::Rows { first: 2, last: 4 });
        assert_eq!(table_document("e.csv", "e", b"only,a,header\n").unwrap(), None);
    }

    #[test]
    fn invalid_utf8_names_its_row() {
        let err = table_document("bad.csv", "bad", b"a,b\nok,1\n\xff\xfe,2\n").unwrap_err();
        assert!(err.starts_with("row 3: "), "{err}");
    }
}
