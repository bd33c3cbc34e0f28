//! The two questions an editor asks of a SyncTeX file: where in the PDF a source line is
//! (forward), and which source line a point of a page shows (inverse). Positions are in PDF
//! big points from the page's top left corner, paths are the project's.

use super::synctex::{Kind, Record, Synctex, MAX_BOXES};
use serde::Serialize;

/// How many lines away a forward query looks when its line made nothing (a blank line, a
/// comment): the next line that made something, as editors expect.
const NEARBY_LINES: u32 = 32;

/// A box of a page that a source line made.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct PdfBox {
    pub page: u32,
    /// Its left edge.
    pub h: f64,
    /// Its top edge.
    pub v: f64,
    pub width: f64,
    pub height: f64,
}

/// A place in a project's source.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct SourcePlace {
    pub file: String,
    pub line: u32,
    /// None when the engine did not record columns.
    pub column: Option<u32>,
}

impl Synctex {
    /// The boxes `line` of `file` made, or those of the nearest line after it (before it, at
    /// the end of a file) that made any.
    pub fn forward(&self, file: &str, line: u32) -> Vec<PdfBox> {
        let Some(&file) = self.files.get(file) else {
            return Vec::new();
        };
        let boxes_of = |wanted: u32| {
            self.by_line
                .get(&(file, wanted))
                .cloned()
                .unwrap_or_default()
        };
        let Some(mut found) = (0..=NEARBY_LINES)
            .flat_map(|distance| [line.checked_add(distance), line.checked_sub(distance)])
            .flatten()
            .map(boxes_of)
            .find(|boxes| !boxes.is_empty())
        else {
            return Vec::new();
        };
        found.sort_unstable();
        found.dedup();
        found
            .into_iter()
            .take(MAX_BOXES)
            .map(|(page, index)| {
                let page = &self.pages[page as usize];
                self.pdf_box(page.number, &page.records[index as usize])
            })
            .collect()
    }

    /// The source place of the point (`h`, `v`) of page `page`: the innermost horizontal box
    /// holding it (or the nearest), and in it the last record of a project file left of it.
    pub fn inverse(&self, page: u32, h: f64, v: f64) -> Option<SourcePlace> {
        let page = self
            .pages
            .iter()
            .find(|candidate| candidate.number == page)?;
        let (h, v) = (h / self.scale, v / self.scale);
        let in_project = |record: &Record| self.inputs.contains_key(&record.tag);
        let target = page
            .records
            .iter()
            .enumerate()
            .filter(|(_, record)| record.kind == Kind::HBox && in_project(record))
            .min_by(|(_, a), (_, b)| {
                let key = |record: &Record| (distance(record, h, v), area(record));
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .map(|(index, _)| index)?;
        let inside = page
            .records
            .iter()
            .filter(|record| record.parent == Some(target as u32) && in_project(record));
        let chosen = inside
            .clone()
            .filter(|record| (record.h as f64) <= h)
            .max_by_key(|record| record.h)
            .or_else(|| inside.min_by_key(|record| record.h))
            .unwrap_or(&page.records[target]);
        Some(SourcePlace {
            file: self.inputs.get(&chosen.tag)?.clone(),
            line: chosen.line,
            column: chosen.column,
        })
    }

    fn pdf_box(&self, page: u32, record: &Record) -> PdfBox {
        let scale = self.scale;
        PdfBox {
            page,
            h: record.h as f64 * scale,
            v: (record.v as f64 - record.height as f64) * scale,
            width: record.width as f64 * scale,
            height: (record.height as f64 + record.depth as f64) * scale,
        }
    }
}

/// How far the point is from the box: 0 inside it.
fn distance(record: &Record, h: f64, v: f64) -> f64 {
    let (left, right) = (record.h as f64, record.h as f64 + record.width as f64);
    let (top, bottom) = (
        record.v as f64 - record.height as f64,
        record.v as f64 + record.depth as f64,
    );
    let dx = (left - h).max(h - right).max(0.0);
    let dy = (top - v).max(v - bottom).max(0.0);
    dx.hypot(dy)
}

fn area(record: &Record) -> f64 {
    (record.width as f64).abs() * (record.height as f64 + record.depth as f64).abs()
}
