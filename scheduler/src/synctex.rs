//! Checking the SyncTeX file a compile left before it is stored: its bytes are the document's
//! (a document can write `output.synctex.gz` itself), and editors will decompress and parse
//! them. So only a complete gzip stream whose content begins as SyncTeX does, and which does
//! not inflate past a bound (no gzip bomb handed on to clients), is kept.

use flate2::read::MultiGzDecoder;
use std::io::Read;

/// What every SyncTeX file begins with.
const SIGNATURE: &[u8] = b"SyncTeX Version:";

/// Whether `bytes` is a gzip stream of at most `max_uncompressed` bytes of SyncTeX.
pub fn is_synctex(bytes: &[u8], max_uncompressed: usize) -> bool {
    // Every member of the stream counts, as zlib's gzread inflates them all: a small SyncTeX
    // member followed by a bomb is a bomb.
    let mut decoder = MultiGzDecoder::new(bytes).take(max_uncompressed as u64 + 1);
    let mut head = vec![0; SIGNATURE.len()];
    if decoder.read_exact(&mut head).is_err() || head != SIGNATURE {
        return false;
    }
    match std::io::copy(&mut decoder, &mut std::io::sink()) {
        Ok(rest) => SIGNATURE.len() as u64 + rest <= max_uncompressed as u64,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn only_whole_bounded_synctex_is_kept() {
        let real = gzip(b"SyncTeX Version:1\nInput:1:/work/main.tex\n");
        assert!(is_synctex(&real, 1000));
        assert!(!is_synctex(&real[..real.len() - 4], 1000), "cut short");
        assert!(!is_synctex(&gzip(b"<html>not synctex"), 1000));
        assert!(!is_synctex(b"SyncTeX Version:1 (not compressed)", 1000));
        let mut bomb = b"SyncTeX Version:1\n".to_vec();
        bomb.resize(10_000, b'x');
        assert!(!is_synctex(&gzip(&bomb), 9_999));
        assert!(is_synctex(&gzip(&bomb), 10_000));
        let mut two_members = gzip(b"SyncTeX Version:1\n");
        two_members.extend(gzip(&vec![0; 20_000]));
        assert!(
            !is_synctex(&two_members, 10_000),
            "a bomb in a second member"
        );
    }
}
