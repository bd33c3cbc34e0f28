//! The first page's thumbnail a job can ask for (`"thumbnail_width"`): Ghostscript, as for EPS
//! figures ([`super::eps::ghostscript`], `-dSAFER`, starting nothing, the compile's uid and
//! Landlock rules), reads the first page's size from the compile's PDF, then renders that page
//! to [`THUMBNAIL_FILE`] at the width asked and the height the page's shape gives. It runs
//! after everything else, in the main folder, whenever the compile left a PDF (one with errors
//! is still a `Succeeded` job's), within a time of its own inside the job's, and only when the
//! image leaves the work folder room: a full folder would fail the job.
//!
//! The document may have written a file of that name itself, or a link there: it is removed
//! first, and again when the render fails, and the supervisor takes the file only when the
//! driver says it rendered one ([`texfleet_sandbox::DriverState::thumbnail`]). What the page's size query prints is the document's to shape (a PDF's boxes are
//! its own), so only a first line of four finite numbers and a second of one counts.

use super::eps::{self, GHOSTSCRIPT};
use super::steps::Steps;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};
use texfleet_sandbox::{
    PDF_FILE, THUMBNAIL_FILE, THUMBNAIL_MAX_ASPECT, THUMBNAIL_WIDTHS, WORK_DIR,
};

/// What the size query and the render may take, each: a heavy page renders in a second or two.
const TIME: Duration = Duration::from_secs(10);
/// The most of the size query's output read: two short lines.
const MAX_OUTPUT: u64 = 4096;
/// Prints the first page's media box, then its rotation (0 when it has none).
const PAGE_SIZE: &str =
    "File (r) file runpdfbegin 1 pdfgetpage dup /MediaBox pget pop == /Rotate pget {==} {0 ==} ifelse quit";

/// Renders the first page of `PDF_FILE` in the current folder `width` pixels wide, ending by
/// `deadline` at the latest. True when [`THUMBNAIL_FILE`] is there for the supervisor to take.
pub fn render(steps: &mut Steps, width: u32, deadline: Instant) -> bool {
    let _ = fs::remove_file(THUMBNAIL_FILE);
    let is_pdf = fs::symlink_metadata(PDF_FILE).is_ok_and(|m| m.file_type().is_file());
    if !THUMBNAIL_WIDTHS.contains(&width) || !is_pdf {
        steps.skip("the thumbnail: no PDF, or a width out of bounds".into());
        return false;
    }
    if !Path::new(GHOSTSCRIPT).exists() {
        steps.skip("the thumbnail: Ghostscript is not installed".into());
        return false;
    }
    let limits = eps::limits(TIME.as_secs());
    let permit = format!("--permit-file-read={PDF_FILE}");
    let file = format!("-sFile={PDF_FILE}");
    let query = eps::ghostscript(
        &["-dNODISPLAY", &permit, &file, "-c", PAGE_SIZE],
        &steps.environment,
    );
    let until = deadline.min(Instant::now() + TIME);
    let size = steps
        .run_by(&query, &limits, until)
        .filter(|exit| exit.success())
        .and_then(|_| page_size(&steps.last_output(MAX_OUTPUT)));
    let Some(size) = size else {
        steps
            .trace
            .push("texfleet: no thumbnail: the first page's size could not be read".into());
        return false;
    };
    let height = height_for(width, size);
    // The image must not fill the work folder: that would fail the job as out of space.
    if !crate::outputs::leaves_room(Path::new(WORK_DIR), largest_png(width, height), 1) {
        steps
            .trace
            .push("texfleet: no thumbnail: the work folder has no room for it".into());
        return false;
    }
    let geometry = format!("-g{width}x{height}");
    let render = eps::ghostscript(
        &[
            "-sDEVICE=png16m",
            "-dFirstPage=1",
            "-dLastPage=1",
            "-dPDFFitPage",
            "-dFIXEDMEDIA",
            &geometry,
            "-dTextAlphaBits=4",
            "-dGraphicsAlphaBits=4",
            "-o",
            THUMBNAIL_FILE,
            PDF_FILE,
        ],
        &steps.environment,
    );
    let until = deadline.min(Instant::now() + TIME);
    let rendered = steps
        .run_by(&render, &limits, until)
        .is_some_and(|exit| exit.success());
    if !rendered {
        let _ = fs::remove_file(THUMBNAIL_FILE);
    }
    rendered
}

/// The most bytes Ghostscript's PNG of `width` by `height` pixels can take: every row's
/// filter byte and RGB samples, stored uncompressed at worst, with the chunks around them.
fn largest_png(width: u32, height: u32) -> u64 {
    let raw = u64::from(height) * (1 + 3 * u64::from(width));
    raw + raw / 100 + 64 * 1024
}

/// The first page's width and height in points as it is shown (its rotation applied), from the
/// size query's output.
fn page_size(output: &[u8]) -> Option<(f64, f64)> {
    let text = std::str::from_utf8(output).ok()?;
    let mut lines = text.lines();
    let corners: Vec<f64> = lines
        .next()?
        .trim()
        .strip_prefix('[')?
        .strip_suffix(']')?
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let rotate: i64 = lines.next()?.trim().parse().ok()?;
    let [x0, y0, x1, y1] = corners.try_into().ok()?;
    let (width, height) = ((x1 - x0).abs(), (y1 - y0).abs());
    // PDF pages are 3 to 14,400 units a side.
    let sane = |side: f64| side.is_finite() && (1.0..=14_400.0).contains(&side);
    if !sane(width) || !sane(height) {
        return None;
    }
    Some(match rotate.rem_euclid(180) {
        90 => (height, width),
        _ => (width, height),
    })
}

/// The thumbnail's height for `width` pixels: the page's shape, at most
/// [`THUMBNAIL_MAX_ASPECT`] times the width (a taller page is fitted into that).
fn height_for(width: u32, (page_width, page_height): (f64, f64)) -> u32 {
    let height = (f64::from(width) * page_height / page_width).round();
    (height as u32).clamp(1, width * THUMBNAIL_MAX_ASPECT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_four_finite_numbers_then_a_rotation_are_a_page_size() {
        assert_eq!(
            page_size(b"[0 0 595.276 841.89]\n0\n"),
            Some((595.276, 841.89))
        );
        assert_eq!(page_size(b"[0 0 595 842]\n90\n"), Some((842.0, 595.0)));
        assert_eq!(page_size(b"[0 0 595 842]\n-270\n"), Some((842.0, 595.0)));
        assert_eq!(page_size(b"[10 20 110 220]\n180\n"), Some((100.0, 200.0)));
        for bad in [
            &b"[0 0 595 842]\n"[..],
            b"[0 0 595]\n0\n",
            b"[0 0 595 842 1]\n0\n",
            b"[0 0 nan 842]\n0\n",
            b"[0 0 inf 842]\n0\n",
            b"[0 0 0 842]\n0\n",
            b"[0 0 99999 842]\n0\n",
            b"0 0 595 842\n0\n",
            b"[0 0 595 842]\nninety\n",
            b"\xff",
        ] {
            assert_eq!(page_size(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_height_follows_the_page_within_bounds() {
        assert_eq!(height_for(200, (595.276, 841.89)), 283);
        assert_eq!(height_for(200, (842.0, 595.0)), 141);
        assert_eq!(height_for(16, (1.0, 14_400.0)), 64);
        assert_eq!(height_for(16, (14_400.0, 1.0)), 1);
    }
}
