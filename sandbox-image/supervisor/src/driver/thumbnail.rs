//! Pages as images: the first page's thumbnail a job can ask for (`"thumbnail_width"`), and a
//! page preview of a stored PDF ([`preview`]). Ghostscript, as for EPS figures
//! ([`super::eps::ghostscript`], `-dSAFER`, starting nothing, the compile's uid and Landlock
//! rules), counts the PDF's pages and reads the page's size, then renders that page to
//! [`THUMBNAIL_FILE`] at the width asked and the height the page's shape gives. A thumbnail is
//! rendered after everything else, in the main folder, whenever the compile left a PDF (one
//! with errors is still a `Succeeded` job's), within a time of its own inside the job's, and
//! only when the image leaves the work folder room: a full folder would fail the job.
//!
//! The document may have written a file of that name itself, or a link there: it is removed
//! first, and again when the render fails, and the supervisor takes the file only when the
//! driver says it rendered one ([`texfleet_sandbox::DriverState::thumbnail`]). What the size
//! query prints is the document's to shape (a PDF's boxes are its own), so only a first line
//! of a page count, a second of four finite numbers and a third of one counts.

use super::eps::{self, GHOSTSCRIPT};
use super::steps::Steps;
use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};
use texfleet_sandbox::{
    DriverState, JobSpec, THUMBNAIL_FILE, THUMBNAIL_MAX_ASPECT, THUMBNAIL_WIDTHS, WORK_DIR,
};

/// The CPU time the size query and the render may take, each (and their wall time beside a
/// compile): a heavy page renders in a second or two.
pub const TIME: Duration = Duration::from_secs(10);
/// The most of the size query's output read: two short lines.
const MAX_OUTPUT: u64 = 4096;
/// Prints the PDF's page count, then page `page`'s media box, its rotation (0 when it has
/// none) and its user unit (the size of its units in points, 1 when it has none); a page past
/// the end stops it after the count.
fn page_size_query(page: u32) -> String {
    format!("File (r) file runpdfbegin pdfpagecount == {page} pdfgetpage dup dup /MediaBox pget pop == /Rotate pget {{==}} {{0 ==}} ifelse /UserUnit pget {{==}} {{1 ==}} ifelse quit")
}

/// What a render gave.
#[derive(Debug, Default)]
pub struct Rendered {
    /// [`THUMBNAIL_FILE`] is there for the supervisor to take.
    pub image: bool,
    /// The PDF's pages, when Ghostscript counted them.
    pub page_count: Option<u32>,
    /// The page's width and height as shown, in hundredths of a point, when it was rendered.
    pub page_size: Option<[u32; 2]>,
}

/// A page preview instead of a compile ([`JobSpec::preview_page`]): the main document, laid
/// out in the current folder, is the PDF. Hands the supervisor whether the page was rendered
/// and how many pages the PDF has.
pub fn preview(
    channel: fs::File,
    mut steps: Steps,
    spec: &JobSpec,
    page: u32,
    deadline: Instant,
) -> io::Result<()> {
    let pdf = Path::new(&spec.main)
        .file_name()
        .and_then(|name| name.to_str());
    let width = spec.thumbnail_width.unwrap_or(0);
    // Its own container, whose whole time is the render's: each run is held to its CPU
    // time alone, so that a render slowed by a busy machine is not cut short.
    let wall = deadline.saturating_duration_since(Instant::now());
    let rendered = pdf.map_or_else(Rendered::default, |pdf| {
        render(&mut steps, pdf, page, (width, wall), deadline)
    });
    let state = DriverState {
        thumbnail: rendered.image,
        page_count: rendered.page_count,
        page_size: rendered.page_size,
        ..DriverState::default()
    };
    super::hand_over(channel, &mut steps, &state.bounded(), &[]);
    super::append_to_log(&steps.trace)
}

/// Renders page `page` of `pdf` in the current folder `width` pixels wide, each of the two runs
/// within [`TIME`] of CPU and `wall` of wall time, ending by `deadline` at the latest.
pub fn render(
    steps: &mut Steps,
    pdf: &str,
    page: u32,
    (width, wall): (u32, Duration),
    deadline: Instant,
) -> Rendered {
    let _ = fs::remove_file(THUMBNAIL_FILE);
    let is_pdf = fs::symlink_metadata(pdf).is_ok_and(|m| m.file_type().is_file());
    if !THUMBNAIL_WIDTHS.contains(&width) || page == 0 || !is_pdf {
        steps.skip("the page image: no PDF, or a width out of bounds".into());
        return Rendered::default();
    }
    if !Path::new(GHOSTSCRIPT).exists() {
        steps.skip("the page image: Ghostscript is not installed".into());
        return Rendered::default();
    }
    let limits = eps::limits(TIME.as_secs());
    let permit = format!("--permit-file-read={pdf}");
    let file = format!("-sFile={pdf}");
    let query = page_size_query(page);
    let query = eps::ghostscript(
        &["-dNODISPLAY", &permit, &file, "-c", &query],
        &steps.environment,
    );
    let until = deadline.min(Instant::now() + wall);
    let answered = steps
        .run_by(&query, &limits, until)
        .is_some_and(|exit| exit.success());
    let output = steps.last_output(MAX_OUTPUT);
    let page_count = page_count(&output);
    let size = page_size(&output).filter(|_| answered);
    let Some(size) = size.filter(|_| page_count.is_some_and(|count| page <= count)) else {
        steps.trace.push(format!(
            "texfleet: no image of page {page}: its size could not be read"
        ));
        return Rendered {
            page_count,
            ..Rendered::default()
        };
    };
    let height = height_for(width, size);
    // The image must not fill the work folder: that would fail the job as out of space.
    if !crate::outputs::leaves_room(Path::new(WORK_DIR), largest_png(width, height), 1) {
        steps.trace.push(format!(
            "texfleet: no image of page {page}: the work folder has no room for it"
        ));
        return Rendered {
            page_count,
            ..Rendered::default()
        };
    }
    let geometry = format!("-g{width}x{height}");
    let (first, last) = (format!("-dFirstPage={page}"), format!("-dLastPage={page}"));
    let render = eps::ghostscript(
        &[
            "-sDEVICE=png16m",
            &first,
            &last,
            "-dPDFFitPage",
            "-dFIXEDMEDIA",
            &geometry,
            "-dTextAlphaBits=4",
            "-dGraphicsAlphaBits=4",
            "-o",
            THUMBNAIL_FILE,
            pdf,
        ],
        &steps.environment,
    );
    let until = deadline.min(Instant::now() + wall);
    let rendered = steps
        .run_by(&render, &limits, until)
        .is_some_and(|exit| exit.success());
    if !rendered {
        let _ = fs::remove_file(THUMBNAIL_FILE);
    }
    let hundredths = |points: f64| (points * 100.0).round() as u32;
    Rendered {
        image: rendered,
        page_count,
        page_size: rendered.then_some([hundredths(size.0), hundredths(size.1)]),
    }
}

/// The PDF's page count: the size query's first line.
fn page_count(output: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(output).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The most bytes Ghostscript's PNG of `width` by `height` pixels can take: every row's
/// filter byte and RGB samples, stored uncompressed at worst, with the chunks around them.
fn largest_png(width: u32, height: u32) -> u64 {
    let raw = u64::from(height) * (1 + 3 * u64::from(width));
    raw + raw / 100 + 64 * 1024
}

/// The page's width and height in points as it is shown (its rotation applied), from the
/// size query's output (after the page count).
fn page_size(output: &[u8]) -> Option<(f64, f64)> {
    let text = std::str::from_utf8(output).ok()?;
    let mut lines = text.lines().skip(1);
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
    let unit: f64 = lines.next()?.trim().parse().ok()?;
    let [x0, y0, x1, y1] = corners.try_into().ok()?;
    let (width, height) = ((x1 - x0).abs(), (y1 - y0).abs());
    // PDF pages are 3 to 14,400 units a side, and a unit at most 75,000 points (PDF 2.0).
    let sane = |side: f64| side.is_finite() && (1.0..=14_400.0).contains(&side);
    let sane_unit = unit.is_finite() && unit > 0.0 && unit <= 75_000.0;
    if !(sane(width) && sane(height) && sane_unit) {
        return None;
    }
    let (width, height) = (width * unit, height * unit);
    if width.max(height) > MAX_POINTS {
        return None;
    }
    Some(match rotate.rem_euclid(180) {
        90 => (height, width),
        _ => (width, height),
    })
}

/// The longest side of a page a preview tells, in points (a side is told in hundredths of a
/// point, as a 32-bit number).
const MAX_POINTS: f64 = 1_000_000.0;

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
            page_size(b"3\n[0 0 595.276 841.89]\n0\n1\n"),
            Some((595.276, 841.89))
        );
        assert_eq!(
            page_size(b"1\n[0 0 595 842]\n90\n1\n"),
            Some((842.0, 595.0))
        );
        assert_eq!(
            page_size(b"1\n[0 0 595 842]\n-270\n1\n"),
            Some((842.0, 595.0))
        );
        assert_eq!(
            page_size(b"1\n[10 20 110 220]\n180\n1\n"),
            Some((100.0, 200.0))
        );
        for bad in [
            &b"[0 0 595 842]\n"[..],
            b"[0 0 595]\n0\n",
            b"[0 0 595 842 1]\n0\n",
            b"[0 0 nan 842]\n0\n",
            b"[0 0 inf 842]\n0\n",
            b"[0 0 0 842]\n0\n",
            b"[0 0 99999 842]\n0\n",
            b"0 0 595 842\n0\n",
            b"[0 0 595 842]\nninety\n1\n",
            b"[0 0 595 842]\n0\n",
            b"[0 0 595 842]\n0\n0\n",
            b"[0 0 595 842]\n0\n-2\n",
            b"[0 0 595 842]\n0\nnan\n",
            b"[0 0 595 842]\n0\n80000\n",
            b"[0 0 14400 842]\n0\n75000\n",
            b"\xff",
        ] {
            let mut output = b"1\n".to_vec();
            output.extend_from_slice(bad);
            assert_eq!(
                page_size(&output),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_user_unit_scales_the_page() {
        assert_eq!(
            page_size(b"1\n[0 0 200 300]\n0\n50\n"),
            Some((10_000.0, 15_000.0))
        );
        assert_eq!(
            page_size(b"1\n[0 0 200 300]\n90\n0.5\n"),
            Some((150.0, 100.0))
        );
    }

    #[test]
    fn the_page_count_is_the_first_line_alone() {
        assert_eq!(page_count(b"12\n[0 0 1 1]\n0\n"), Some(12));
        assert_eq!(page_count(b"2\n"), Some(2));
        for bad in [&b"-1\n"[..], b"1.5\n", b"[0 0 1 1]\n", b"", b"\xff"] {
            assert_eq!(page_count(bad), None);
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
