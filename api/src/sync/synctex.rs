//! Reading a SyncTeX file: which boxes of which page each line of each source made. The file
//! is the compile's, so the document's: it is read within bounds of size and records, never
//! trusted to be well formed, and a line it does not explain is skipped.

use flate2::read::MultiGzDecoder;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};

/// The most of a SyncTeX file read, uncompressed: a thesis of a few hundred pages writes a few
/// tens of megabytes.
pub const MAX_UNCOMPRESSED: u64 = 64 * 1024 * 1024;
/// The most records read (48 bytes each): a 300-page thesis makes about a million.
pub const MAX_RECORDS: usize = 1_000_000;
/// The most lines read: a file's boxes open and close, so a few lines a record; a line that is
/// no record costs a parse its time all the same.
const MAX_LINES: usize = 3 * MAX_RECORDS;
/// The most pages and sources read: a page costs its bytes even when it is empty.
const MAX_PAGES: usize = 100_000;
const MAX_INPUTS: usize = 10_000;
/// The longest line read; SyncTeX's are a few dozen bytes, an input's path a few hundred.
const MAX_LINE: usize = 4096;
/// The most boxes kept of one source line: a forward answer lists at most these.
pub const MAX_BOXES: usize = 64;
/// Where the sandbox compiles: the sources' names in the file begin with it.
const WORK_DIR: &str = "/work";
/// Scaled points in a big point, the PDF's unit.
const SP_PER_BP: f64 = 65_536.0 * 72.27 / 72.0;

/// Why a SyncTeX file cannot be queried.
#[derive(Debug, PartialEq)]
pub enum Unreadable {
    NotSynctex,
    TooLarge,
}

/// What a record is: a box SyncTeX can point into, or a point within one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A horizontal box, `(`: a line of text, a word, a figure.
    HBox,
    /// A vertical box, `[`.
    VBox,
    /// A glue, kern, math or character position inside a box, or a void box (`h`, `v`: an
    /// indent, a strut).
    Point,
}

/// A record of a page, in scaled points from the page's top left corner (`v` is the baseline).
#[derive(Debug, Clone, Copy)]
pub struct Record {
    pub kind: Kind,
    pub tag: u32,
    pub line: u32,
    pub column: Option<u32>,
    pub h: i32,
    pub v: i32,
    pub width: i32,
    pub height: i32,
    pub depth: i32,
    /// The index in its page of the box it is in.
    pub parent: Option<u32>,
}

#[derive(Debug, Default)]
pub struct Page {
    pub number: u32,
    pub records: Vec<Record>,
}

/// A parsed SyncTeX file.
#[derive(Debug)]
pub struct Synctex {
    /// The project's sources by tag, as project paths: a tag of another file (a package's)
    /// or of a path no project file can have is not here.
    pub inputs: HashMap<u32, String>,
    pub pages: Vec<Page>,
    /// Big points per unit of the file's positions.
    pub scale: f64,
    /// Each project path of `inputs`, numbered: a file the engine read many times has many
    /// tags, and a forward query looks it up once, not once per tag.
    pub files: HashMap<String, u32>,
    /// The horizontal boxes each line of each project file made (the first [`MAX_BOXES`]), by
    /// (number in `files`, line), as (page index, record index), in page order: a forward
    /// query is a lookup, not a walk through the pages.
    pub by_line: HashMap<(u32, u32), Vec<(u32, u32)>>,
}

impl Synctex {
    /// About how many bytes it holds, by what its vectors and tables have room for.
    pub fn weight(&self) -> usize {
        let records: usize = self.pages.iter().map(|page| page.records.capacity()).sum();
        let paths: usize = (self.inputs.values())
            .chain(self.files.keys())
            .map(|path| path.capacity() + 48)
            .sum();
        let lines: usize = self
            .by_line
            .values()
            .map(|boxes| 8 * boxes.capacity())
            .sum();
        records * std::mem::size_of::<Record>()
            + self.pages.capacity() * std::mem::size_of::<Page>()
            + paths
            + self.by_line.capacity() * 48
            + lines
    }

    /// Reads a gzip-compressed SyncTeX file.
    pub fn parse(gzip: &[u8]) -> Result<Synctex, Unreadable> {
        let mut reader = BufReader::new(MultiGzDecoder::new(gzip).take(MAX_UNCOMPRESSED + 1));
        let mut synctex = Synctex {
            inputs: HashMap::new(),
            files: HashMap::new(),
            pages: Vec::new(),
            scale: 1.0 / SP_PER_BP,
            by_line: HashMap::new(),
        };
        let (mut unit, mut magnification): (f64, f64) = (1.0, 1000.0);
        let mut line = Vec::new();
        let mut read = 0u64;
        let mut lines = 0usize;
        let mut records = 0usize;
        let mut pages = 0usize;
        let mut open: Vec<u32> = Vec::new();
        let mut page: Option<Page> = None;
        loop {
            line.clear();
            let got = (&mut reader)
                .take(MAX_LINE as u64)
                .read_until(b'\n', &mut line)
                .map_err(|_| Unreadable::NotSynctex)?;
            if got == 0 {
                break;
            }
            read += got as u64;
            lines += 1;
            if read > MAX_UNCOMPRESSED || lines > MAX_LINES {
                return Err(Unreadable::TooLarge);
            }
            if read == got as u64 && !line.starts_with(b"SyncTeX Version:") {
                return Err(Unreadable::NotSynctex);
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if let Some(input) = text.strip_prefix("Input:") {
                if let Some((tag, path)) = input.split_once(':') {
                    if let Ok(tag) = tag.parse() {
                        match project_path(path) {
                            Some(path) => synctex.inputs.insert(tag, path),
                            None => synctex.inputs.remove(&tag),
                        };
                    }
                }
                if synctex.inputs.len() > MAX_INPUTS {
                    return Err(Unreadable::TooLarge);
                }
                continue;
            }
            if let Some(value) = text.strip_prefix("Unit:") {
                unit = value.parse().unwrap_or(1.0);
                continue;
            }
            if let Some(value) = text.strip_prefix("Magnification:") {
                magnification = value.parse().unwrap_or(1000.0);
                continue;
            }
            let Some(kind) = text.chars().next() else {
                continue;
            };
            match kind {
                '{' => {
                    pages += 1;
                    if pages > MAX_PAGES {
                        return Err(Unreadable::TooLarge);
                    }
                    open.clear();
                    page = Some(Page {
                        number: text[1..].parse().unwrap_or(0),
                        records: Vec::new(),
                    });
                }
                '}' => {
                    if let Some(done) = page.take().filter(|done| !done.records.is_empty()) {
                        synctex.pages.push(done);
                    }
                }
                ']' | ')' => {
                    open.pop();
                }
                '[' | '(' | 'h' | 'v' | 'x' | 'k' | 'g' | '$' => {
                    let Some(page) = page.as_mut() else { continue };
                    let Some(mut record) = parse_record(&text[1..]) else {
                        continue;
                    };
                    records += 1;
                    if records > MAX_RECORDS {
                        return Err(Unreadable::TooLarge);
                    }
                    record.kind = match kind {
                        '(' => Kind::HBox,
                        '[' => Kind::VBox,
                        _ => Kind::Point,
                    };
                    record.parent = open.last().copied();
                    page.records.push(record);
                    if kind == '[' || kind == '(' {
                        open.push(page.records.len() as u32 - 1);
                    }
                }
                _ => {}
            }
        }
        if read == 0 {
            return Err(Unreadable::NotSynctex);
        }
        // Within a thousand times TeX's own units either way: a scale the document chose
        // beyond that would give answers no PDF has (or not numbers at all).
        let scale = unit * magnification / 1000.0 / SP_PER_BP;
        if (1e-3 / SP_PER_BP..=1e3 / SP_PER_BP).contains(&scale) {
            synctex.scale = scale;
        }
        synctex.index_lines();
        Ok(synctex)
    }

    fn index_lines(&mut self) {
        let mut numbers = HashMap::new();
        for (tag, path) in &self.inputs {
            let next = self.files.len() as u32;
            let file = *self.files.entry(path.clone()).or_insert(next);
            numbers.insert(*tag, file);
        }
        for page in &mut self.pages {
            page.records.shrink_to_fit();
        }
        self.pages.shrink_to_fit();
        for (page_index, page) in self.pages.iter().enumerate() {
            for (index, record) in page.records.iter().enumerate() {
                let Some(&file) = numbers.get(&record.tag) else {
                    continue;
                };
                let hbox = match record.kind {
                    Kind::HBox => Some(index as u32),
                    _ => record
                        .parent
                        .filter(|&parent| page.records[parent as usize].kind == Kind::HBox),
                };
                let Some(hbox) = hbox else { continue };
                let boxes = self.by_line.entry((file, record.line)).or_default();
                let at = (page_index as u32, hbox);
                if boxes.len() < MAX_BOXES && boxes.last() != Some(&at) {
                    boxes.push(at);
                }
            }
        }
    }
}

/// `tag,line[,column]:h,v[:width,height,depth]` (a kern's `:width` alone).
fn parse_record(text: &str) -> Option<Record> {
    let mut parts = text.split(':');
    let mut place = parts.next()?.split(',');
    let tag = place.next()?.parse().ok()?;
    let line = place.next()?.parse().ok()?;
    let column = place.next().and_then(|column| column.parse().ok());
    let mut position = parts.next()?.split(',');
    let h = position.next()?.parse().ok()?;
    let v = position.next()?.parse().ok()?;
    let mut size = parts
        .next()
        .into_iter()
        .flat_map(|size| size.split(','))
        .map(|value| value.parse::<i32>().unwrap_or(0));
    Some(Record {
        kind: Kind::Point,
        tag,
        line,
        column,
        h,
        v,
        width: size.next().unwrap_or(0),
        height: size.next().unwrap_or(0),
        depth: size.next().unwrap_or(0),
        parent: None,
    })
}

/// The project path of a source as the compile named it (`/work/./ch/one.tex`), None for a
/// file outside the project (a package's) or a name no project file can have (the file is the
/// document's: an editor would open what the answer names).
pub fn project_path(path: &str) -> Option<String> {
    let inside = path.strip_prefix(WORK_DIR)?.strip_prefix('/')?;
    let mut parts: Vec<&str> = Vec::new();
    for component in inside.split('/') {
        match component {
            "." | "" => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let path = parts.join("/");
    texfleet_core::validate::check_path(&path)
        .ok()
        .map(|()| path)
}
