use super::query::{PdfBox, SourcePlace};
use super::synctex::{project_path, Synctex, Unreadable, MAX_RECORDS, MAX_UNCOMPRESSED};
use flate2::write::GzEncoder;
use proptest::prelude::*;
use std::io::Write;

fn gzip(text: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(text).unwrap();
    encoder.finish().unwrap()
}

/// What pdfLaTeX wrote for "Hello world." on line 3 of main.tex, a section on line 5 and, on
/// page 2, a line of sub.tex.
const COMPILED: &str = "SyncTeX Version:1
Input:1:/work/./main.tex
Input:2:/usr/share/texfleet/texmf-common/tex/latex/base/article.cls
Output:pdf
Magnification:1000
Unit:1
X Offset:0
Y Offset:0
Content:
!412
{1
[1,7:4736286,46220574:26673152,41484288,0
[1,7:8799518,44254494:22609920,36044800,0
(1,4:8799518,8865054:22609920,455111,0
h1,3:8799518,8865054:983040,0,0
x1,3:11257121,8865054
g1,3:11475574,8865054
x1,3:11948890,8865054
k1,4:31409438,8865054:18166209
)
(1,5:8799518,11032290:22609920,647495,0
(1,5:8799518,11032290:1592523,608173,0
g1,5:8799518,11032290
x1,5:9330359,11032290
)
x1,5:11897182,11032290
)
]
]
}1
Input:6:/work/./sub.tex
{2
[1,10:4736286,46220574:26673152,41484288,0
(6,1:8799518,8865054:22609920,455111,127431
x6,1:8799518,8865054
x2,1:12000000,8865054
)
]
}2
";

fn compiled() -> Synctex {
    Synctex::parse(&gzip(COMPILED.as_bytes())).unwrap()
}

fn bp(sp: i32) -> f64 {
    sp as f64 * 72.0 / 72.27 / 65536.0
}

#[test]
fn a_line_is_found_in_the_box_of_the_line_it_made() {
    let boxes = compiled().forward("main.tex", 3);
    let expected = PdfBox {
        page: 1,
        h: bp(8799518),
        v: bp(8865054 - 455111),
        width: bp(22609920),
        height: bp(455111),
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        boxes.len() == 1
            && boxes[0].page == expected.page
            && close(boxes[0].h, expected.h)
            && close(boxes[0].v, expected.v)
            && close(boxes[0].width, expected.width)
            && close(boxes[0].height, expected.height),
        "{boxes:?}"
    );
    // A blank line: the next line that made something.
    assert_eq!(compiled().forward("main.tex", 2), boxes);
    assert_eq!(compiled().forward("sub.tex", 1)[0].page, 2);
    assert!(compiled().forward("other.tex", 3).is_empty());
    assert!(compiled().forward("main.tex", 500).is_empty());
}

#[test]
fn a_point_is_found_at_the_line_that_made_what_is_left_of_it() {
    let synctex = compiled();
    let place = |file: &str, line| {
        Some(SourcePlace {
            file: file.into(),
            line,
            column: None,
        })
    };
    // Inside "Hello world.", right of its first records.
    assert_eq!(
        synctex.inverse(1, bp(11300000), bp(8800000)),
        place("main.tex", 3)
    );
    // At the line's end, right of the paragraph's last kern, which the blank line after it made.
    assert_eq!(
        synctex.inverse(1, bp(31500000), bp(8800000)),
        place("main.tex", 4)
    );
    // Inside the section's number, a box within the line.
    assert_eq!(
        synctex.inverse(1, bp(9000000), bp(11000000)),
        place("main.tex", 5)
    );
    // Below everything: the nearest box.
    assert_eq!(
        synctex.inverse(1, bp(9000000), bp(40000000)),
        place("main.tex", 5)
    );
    // A record of a package's file is not a place of the project.
    assert_eq!(
        synctex.inverse(2, bp(13000000), bp(8800000)),
        place("sub.tex", 1)
    );
    assert_eq!(synctex.inverse(3, 10.0, 10.0), None);
}

#[test]
fn only_the_project_s_files_have_project_paths() {
    assert_eq!(
        project_path("/work/./ch/one.tex").as_deref(),
        Some("ch/one.tex")
    );
    assert_eq!(
        project_path("/work/ch/../main.tex").as_deref(),
        Some("main.tex")
    );
    assert_eq!(project_path("/work/../etc/passwd"), None);
    assert_eq!(project_path("/workshop/main.tex"), None);
    assert_eq!(
        project_path("/usr/share/texmf/tex/latex/base/article.cls"),
        None
    );
    // Names no project file can have: an editor would open what the answer names.
    let odd = [
        "C:\\Windows\\win.ini",
        "\\\\server\\share\\x",
        "file:/etc/passwd",
        "~/.bashrc",
        "a\u{1b}[31m.tex",
        "\u{202e}gnp.exe",
        "-rf",
        ".git/config",
    ];
    for odd in odd {
        assert_eq!(project_path(&format!("/work/{odd}")), None, "{odd}");
    }
}

#[test]
fn a_scale_no_pdf_has_is_not_taken_and_empty_pages_weigh_nothing() {
    let text = COMPILED
        .replace("Magnification:1000", "Magnification:1e300")
        .replace("Unit:1\n", "Unit:1e300\n");
    let synctex = Synctex::parse(&gzip(text.as_bytes())).unwrap();
    assert!(synctex
        .forward("main.tex", 3)
        .iter()
        .all(|found| found.h.is_finite() && found.h < 1000.0));
    let mut empty = b"SyncTeX Version:1\n".to_vec();
    for page in 0..50_000 {
        empty.extend_from_slice(format!("{{{page}\n}}{page}\n").as_bytes());
    }
    assert!(Synctex::parse(&gzip(&empty)).unwrap().weight() < 1024);
    for page in 50_000..100_001 {
        empty.extend_from_slice(format!("{{{page}\n}}{page}\n").as_bytes());
    }
    assert_eq!(
        Synctex::parse(&gzip(&empty)).unwrap_err(),
        Unreadable::TooLarge
    );
}

#[test]
fn what_is_not_synctex_or_is_too_large_is_refused() {
    assert_eq!(
        Synctex::parse(b"not gzip").unwrap_err(),
        Unreadable::NotSynctex
    );
    assert_eq!(
        Synctex::parse(&gzip(b"%PDF-1.5\n")).unwrap_err(),
        Unreadable::NotSynctex
    );
    // A bomb: a small file that inflates past the bound.
    let mut bomb = b"SyncTeX Version:1\n".to_vec();
    bomb.resize(MAX_UNCOMPRESSED as usize + 2, b'\n');
    assert_eq!(
        Synctex::parse(&gzip(&bomb)).unwrap_err(),
        Unreadable::TooLarge
    );
    let mut many = b"SyncTeX Version:1\nInput:1:/work/main.tex\n{1\n".to_vec();
    for _ in 0..=MAX_RECORDS {
        many.extend_from_slice(b"x1,1:1,1\n");
    }
    assert_eq!(
        Synctex::parse(&gzip(&many)).unwrap_err(),
        Unreadable::TooLarge
    );
    // Lines that are no record, each a little of the parse's time.
    let mut idle = b"SyncTeX Version:1\nInput:1:/work/main.tex\n{1\n".to_vec();
    idle.extend(b"x\n".repeat(3 * MAX_RECORDS));
    assert_eq!(
        Synctex::parse(&gzip(&idle)).unwrap_err(),
        Unreadable::TooLarge
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parse_whose_query_went_away_holds_its_place_and_is_kept() {
    let cache = std::sync::Arc::new(super::SyncCache::new());
    let project = uuid::Uuid::new_v4();
    let place = cache.place_to_parse(project).await;
    let parse = super::parse_and_keep(
        cache.clone(),
        place,
        project,
        "compiles/a/output.synctex.gz".into(),
        gzip(COMPILED.as_bytes()),
    );
    drop(parse);
    // The project's place comes back once the parse has ended, and what it read is kept.
    let _again = cache.place_to_parse(project).await;
    assert!(cache.get("compiles/a/output.synctex.gz").is_some());
}

/// A parsed file that weighs about `mebibytes`.
fn weighing(mebibytes: usize) -> std::sync::Arc<Synctex> {
    let mut synctex = compiled();
    let records = mebibytes * 1024 * 1024 / std::mem::size_of::<super::synctex::Record>();
    synctex.pages[0].records.reserve_exact(records);
    std::sync::Arc::new(synctex)
}

#[test]
fn one_project_s_files_keep_at_most_half_the_cache_and_push_out_its_own() {
    let cache = super::SyncCache::new();
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    cache.keep("a1".into(), a, Ok(weighing(40)));
    cache.keep("b1".into(), b, Ok(weighing(40)));
    cache.keep("a2".into(), a, Ok(weighing(40)));
    cache.keep("a3".into(), a, Ok(weighing(40)));
    let kept = |key: &str| cache.get(key).is_some();
    assert!(!kept("a1"), "the project's own least recent goes");
    assert!(kept("b1") && kept("a2") && kept("a3"));
}

#[tokio::test(start_paused = true)]
async fn a_project_parses_one_file_at_a_time_and_leaves_a_place_to_others() {
    let cache = super::SyncCache::new();
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let _parsing = cache.place_to_parse(a).await;
    let wait = std::time::Duration::from_secs(60);
    assert!(tokio::time::timeout(wait, cache.place_to_parse(a))
        .await
        .is_err());
    assert!(tokio::time::timeout(wait, cache.place_to_parse(b))
        .await
        .is_ok());
}

#[test]
fn boxes_nested_deep_and_never_closed_are_read() {
    let mut deep = b"SyncTeX Version:1\nInput:1:/work/main.tex\n{1\n".to_vec();
    for line in 0..100_000 {
        deep.extend_from_slice(format!("(1,{line}:1,1:10,10,10\n").as_bytes());
    }
    deep.extend_from_slice(b"]]]]\n}1\n");
    let synctex = Synctex::parse(&gzip(&deep)).unwrap();
    assert_eq!(synctex.forward("main.tex", 99_999).len(), 1);
    assert!(synctex.inverse(1, 0.0, 0.0).is_some());
}

proptest! {
    #[test]
    fn any_lines_after_the_signature_parse_and_answer_without_a_panic(
        lines in proptest::collection::vec(
            prop_oneof![
                "[\\[\\(\\)\\]hvxkg$!{}][0-9,:-]{0,40}",
                "Input:[0-9]{1,3}:/work/[a-z./]{0,20}",
                "(Unit|Magnification):[0-9.e-]{0,8}",
                ".{0,60}",
            ],
            0..200,
        ),
        page in 0u32..4,
        line in 0u32..100,
        h in -1e6f64..1e6,
        v in -1e6f64..1e6,
    ) {
        let text = format!("SyncTeX Version:1\n{}\n", lines.join("\n"));
        if let Ok(synctex) = Synctex::parse(&gzip(text.as_bytes())) {
            let _ = synctex.forward("main.tex", line);
            let _ = synctex.inverse(page, h, v);
        }
    }
}

#[test]
fn one_line_in_many_boxes_is_answered_with_its_first_boxes() {
    let mut many = b"SyncTeX Version:1\nInput:1:/work/main.tex\n{1\n".to_vec();
    for h in 0..200_000 {
        many.extend_from_slice(format!("(1,1:{h},1:10,10,10\n)\n").as_bytes());
    }
    many.extend_from_slice(b"}1\n");
    let boxes = Synctex::parse(&gzip(&many)).unwrap().forward("main.tex", 1);
    assert_eq!(boxes.len(), 64);
    assert!(
        boxes.windows(2).all(|pair| pair[0].h < pair[1].h),
        "in page order"
    );
}

#[test]
fn a_file_read_under_many_tags_is_one_file_to_a_forward_query() {
    let mut many = b"SyncTeX Version:1\n".to_vec();
    for tag in 1..10_000 {
        many.extend_from_slice(format!("Input:{tag}:/work/main.tex\n").as_bytes());
    }
    many.extend_from_slice(b"{1\n");
    for tag in 1..10_000 {
        many.extend_from_slice(format!("({tag},1:{tag},1:10,10,10\n)\n").as_bytes());
    }
    many.extend_from_slice(b"}1\n");
    let synctex = Synctex::parse(&gzip(&many)).unwrap();
    assert_eq!(synctex.by_line.len(), 1);
    assert_eq!(synctex.forward("main.tex", 1).len(), 64);
}

#[test]
fn a_file_weighs_what_its_vectors_hold_room_for_and_a_heavy_one_is_refused() {
    let mut synctex = compiled();
    synctex.pages[0].records.reserve(100_000);
    assert!(synctex.weight() >= 100_000 * std::mem::size_of::<super::synctex::Record>());
    let bytes = gzip(COMPILED.as_bytes());
    let weight = super::read(&bytes, usize::MAX).unwrap().weight();
    assert!(super::read(&bytes, weight).is_ok());
    assert_eq!(
        super::read(&bytes, weight - 1).unwrap_err(),
        "the job's SyncTeX file is too large to query"
    );
}

#[test]
fn a_cache_remembers_thousands_of_files_that_cannot_be_read() {
    let cache = super::SyncCache::new();
    for n in 0..5_000 {
        cache.keep(
            format!("compiles/{n}/output.synctex.gz"),
            uuid::Uuid::nil(),
            Err("unreadable"),
        );
    }
    assert!(cache.get("compiles/0/output.synctex.gz").is_some());
}
