//! Reading PDFs the way a reader would: their text (poppler), and every stream inflated so
//! that a search for a leaked secret sees past compression; and a figure to put in one.

/// The text of a PDF, by poppler's pdftotext.
pub fn pdf_text(pdf: &[u8]) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pdf).unwrap();
    let output = std::process::Command::new("pdftotext")
        .arg(file.path())
        .arg("-")
        .output()
        .expect("pdftotext (poppler-utils)");
    assert!(output.status.success(), "pdftotext failed on the PDF");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every page of a PDF rendered in grey at 40 dpi by poppler's pdftoppm, one PGM after the
/// other: two PDFs that render the same give the same bytes.
pub fn pdf_pages_rendered(pdf: &[u8]) -> Vec<u8> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), pdf).unwrap();
    let output = std::process::Command::new("pdftoppm")
        .args(["-r", "40", "-gray"])
        .arg(file.path())
        .output()
        .expect("pdftoppm (poppler-utils)");
    assert!(output.status.success(), "pdftoppm failed on the PDF");
    output.stdout
}

/// A PDF's bytes followed by every stream it holds, inflated where it is Flate-compressed, so
/// that a search sees content that compression would hide.
pub fn pdf_bytes_inflated(pdf: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut all = pdf.to_vec();
    let mut rest = pdf;
    while let Some(start) = find(rest, b"stream") {
        let body = &rest[start + 6..];
        let body = body
            .strip_prefix(b"\r\n")
            .or_else(|| body.strip_prefix(b"\n"))
            .unwrap_or(body);
        let end = find(body, b"endstream").unwrap_or(body.len());
        let mut inflated = Vec::new();
        if flate2::read::ZlibDecoder::new(&body[..end])
            .read_to_end(&mut inflated)
            .is_ok()
        {
            all.extend_from_slice(&inflated);
        }
        rest = &body[end..];
        if rest.len() >= 9 {
            rest = &rest[9..];
        }
    }
    all
}

/// A valid 4x4 red PNG, for documents that include a figure.
pub fn tiny_png() -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg==")
        .expect("base64")
}

/// How many objects of `/Subtype /<subtype>` (`Image`, `Form`) the PDF holds, in object
/// streams too: an included figure is one or the other.
pub fn pdf_objects_of_subtype(pdf: &[u8], subtype: &str) -> usize {
    let streams = pdf_bytes_inflated(pdf);
    count(&streams, format!("/Subtype /{subtype}").as_bytes())
        + count(&streams, format!("/Subtype/{subtype}").as_bytes())
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
