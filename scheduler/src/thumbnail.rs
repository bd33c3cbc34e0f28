//! Whether the thumbnail out of the sandbox is what Ghostscript writes for the width asked:
//! the document could have written the file itself (the driver removes it first, but nothing
//! out of the sandbox is trusted). It is served as `image/png` to browsers, so it must be one
//! PNG of the expected shape from its first byte to its last, not a page of HTML that starts
//! like one.

use texfleet_sandbox::{THUMBNAIL_MAX_ASPECT, THUMBNAIL_WIDTHS};

const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
/// The first chunk: 13 bytes of header, named IHDR.
const HEADER: &[u8] = b"\0\0\0\x0dIHDR";
/// The last chunk: empty, named IEND, with its CRC.
const END: &[u8] = b"\0\0\0\0IEND\xae\x42\x60\x82";

/// True when `bytes` is a whole PNG `width` pixels wide, at most [`THUMBNAIL_MAX_ASPECT`]
/// times as high, 8-bit RGB without interlacing (Ghostscript's `png16m`).
pub fn is_thumbnail(bytes: &[u8], width: u32) -> bool {
    let Some(header) = bytes
        .strip_prefix(SIGNATURE)
        .and_then(|rest| rest.strip_prefix(HEADER))
        .and_then(|rest| rest.get(..13))
    else {
        return false;
    };
    let number = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().unwrap());
    let (found_width, height) = (number(0), number(4));
    let rgb_8_bit_plain = header[8..] == [8, 2, 0, 0, 0];
    THUMBNAIL_WIDTHS.contains(&width)
        && found_width == width
        && (1..=width * THUMBNAIL_MAX_ASPECT).contains(&height)
        && rgb_8_bit_plain
        && bytes.ends_with(END)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32, kind: [u8; 5]) -> Vec<u8> {
        let mut bytes = [SIGNATURE, HEADER].concat();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes.extend(kind);
        bytes.extend([0; 4]);
        bytes.extend(END);
        bytes
    }

    const RGB: [u8; 5] = [8, 2, 0, 0, 0];

    #[test]
    fn the_api_and_the_sandbox_bound_widths_alike() {
        assert_eq!(texfleet_core::model::THUMBNAIL_WIDTHS, THUMBNAIL_WIDTHS);
    }

    #[test]
    fn only_a_whole_png_of_the_width_asked_and_a_bounded_height_is_a_thumbnail() {
        assert!(is_thumbnail(&png(200, 283, RGB), 200));
        assert!(is_thumbnail(&png(200, 800, RGB), 200));
        assert!(!is_thumbnail(&png(200, 801, RGB), 200), "too tall");
        assert!(!is_thumbnail(&png(200, 0, RGB), 200), "empty");
        assert!(!is_thumbnail(&png(201, 283, RGB), 200), "another width");
        assert!(!is_thumbnail(&png(2000, 283, RGB), 2000), "too wide");
        assert!(!is_thumbnail(&png(200, 283, [8, 6, 0, 0, 0]), 200), "alpha");
        assert!(
            !is_thumbnail(&png(200, 283, [8, 2, 0, 0, 1]), 200),
            "interlaced"
        );
        let whole = png(200, 283, RGB);
        assert!(!is_thumbnail(&whole[..whole.len() - 1], 200), "cut short");
        let mut html = whole.clone();
        html.extend(b"<html><script>alert(1)</script>");
        assert!(!is_thumbnail(&html, 200), "something after its end");
        assert!(!is_thumbnail(b"<html>", 200));
        assert!(!is_thumbnail(&whole[..20], 200));
    }
}
