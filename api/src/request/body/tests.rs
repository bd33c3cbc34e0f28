use super::*;
use serde_json::json;

fn limits() -> Limits {
    Limits {
        default_timeout_seconds: 60,
        max_timeout_seconds: 300,
        texlive_years: vec!["2022".into(), "2024".into()],
        default_texlive: "2024".into(),
    }
}
const PROJECT: &str = "0b9f3c2a-1d4e-4f5a-9b6c-7d8e9f0a1b2c";
/// The SHA-256 of "abc".
const HASH: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

#[test]
fn a_file_is_sent_or_named_by_hash_never_both() {
    let body = |files: Value| json!({ "project_id": PROJECT, "latex": "x", "files": files });
    let request = parse(
        body(json!([{ "path": "a.png", "sha256": HASH.to_uppercase() }])),
        &limits(),
    )
    .ok()
    .unwrap();
    assert_eq!(request.stored_files[0].sha256.hex(), HASH);
    assert_eq!(request.files.len(), 1, "the main document only");
    for (files, wanted) in [
        (
            json!([{ "path": "a.png", "sha256": "abc" }]),
            vec!["files[0].sha256"],
        ),
        (
            json!([{ "path": "a.png", "sha256": 7 }]),
            vec!["files[0].sha256"],
        ),
        (
            json!([{ "path": "a.png", "sha256": HASH, "content": "x" }]),
            vec!["files[0].content"],
        ),
        (json!([{ "path": "a.png" }]), vec!["files[0].content"]),
        (
            json!([{ "path": "a.png", "sha256": HASH }, { "path": "a.png", "content": "x" }]),
            vec!["files[1].path"],
        ),
        (
            json!([{ "path": "main.tex", "sha256": HASH }]),
            vec!["files[0].path"],
        ),
    ] {
        let mut names = fields(parse(body(files.clone()), &limits()).err().unwrap());
        names.sort();
        assert_eq!(names, wanted, "{files}");
    }
}

fn fields(errors: Vec<FieldError>) -> Vec<String> {
    errors.into_iter().map(|e| e.field).collect()
}

#[test]
fn accepts_both_source_fields_and_files() {
    for key in ["input_latex", "latex"] {
        let body = json!({ "project_id": PROJECT, key: "\\relax", "files": [
            { "path": "img/a.png", "content_base64": "iVBORw==" },
            { "path": "ch1.tex", "content": "Hi" } ] });
        let request = parse(body.clone(), &limits()).ok().unwrap();
        assert_eq!(request.engine, Engine::Pdflatex);
        assert_eq!(request.timeout_seconds, 60);
        let paths: Vec<_> = request.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["main.tex", "img/a.png", "ch1.tex"]);
        assert_eq!(request.files[1].content, [0x89, b'P', b'N', b'G']);
    }
}

#[test]
fn names_every_bad_field() {
    let body = json!({ "project_id": "nope", "latex": "x", "input_latex": "y", "engine": "tex",
        "timeout_seconds": 0, "halt_on_error": "yes", "draft": 1, "colour": 1,
        "files": [ { "path": "../x", "content": "a" }, { "path": "a.tex" }, 3 ] });
    let mut names = fields(parse(body.clone(), &limits()).err().unwrap());
    names.sort();
    assert_eq!(
        names,
        [
            "colour",
            "draft",
            "engine",
            "files[0].path",
            "files[1].content",
            "files[2]",
            "halt_on_error",
            "latex",
            "project_id",
            "timeout_seconds"
        ]
    );
}

#[test]
fn a_thumbnail_width_is_an_integer_within_bounds() {
    let body = |width: Value| {
        json!({ "project_id": PROJECT, "input_latex": "x",
                                      "thumbnail_width": width })
    };
    for (width, expected) in [
        (json!(16), Some(16)),
        (json!(1200), Some(1200)),
        (Value::Null, None),
    ] {
        let request = parse(body(width), &limits()).ok().unwrap();
        assert_eq!(request.thumbnail_width, expected);
    }
    for width in [
        json!(15),
        json!(1201),
        json!(-1),
        json!(200.5),
        json!("200"),
        json!(1u64 << 33),
    ] {
        let errors = parse(body(width.clone()), &limits()).err().unwrap();
        assert_eq!(errors.len(), 1, "{width}");
        assert_eq!(errors[0].field, "thumbnail_width");
        assert_eq!(errors[0].message, "must be an integer from 16 to 1200");
    }
}

#[test]
fn a_file_where_a_folder_must_be_is_refused_by_name() {
    let body = json!({ "project_id": PROJECT, "input_latex": "x", "files": [
        { "path": "a", "content": "1" }, { "path": "a/b.tex", "content": "2" },
        { "path": "main.tex/x.tex", "content": "3" } ] });
    assert_eq!(
        fields(parse(body.clone(), &limits()).err().unwrap()),
        ["files[1].path", "files[2].path"]
    );
}

#[test]
fn main_names_one_of_the_files_and_reserves_outputs_beside_it() {
    let body = json!({ "project_id": PROJECT, "main": "paper/main.tex", "files": [
        { "path": "paper/main.tex", "content": "x" }, { "path": "main.tex", "content": "y" },
        { "path": "output.pdf", "content": "z" } ] });
    let request = parse(body.clone(), &limits()).ok().unwrap();
    assert_eq!(request.main, "paper/main.tex");
    let paths: Vec<_> = request.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["paper/main.tex", "main.tex", "output.pdf"]);

    for (body, wanted) in [
        (
            json!({ "project_id": PROJECT, "main": "a.tex", "files": [
            { "path": "b.tex", "content": "x" } ] }),
            vec!["main"],
        ),
        (
            json!({ "project_id": PROJECT, "main": "../a.tex" }),
            vec!["main", "main"],
        ),
        (
            json!({ "project_id": PROJECT, "main": "c++.tex", "files": [
                { "path": "c++.tex", "content": "x" } ] }),
            vec!["main"],
        ),
        (
            json!({ "project_id": PROJECT, "main": "a.tex", "input_latex": "x", "files": [
            { "path": "a.tex", "content": "x" } ] }),
            vec!["main"],
        ),
        (
            json!({ "project_id": PROJECT, "main": "p/a.tex", "files": [
            { "path": "p/a.tex", "content": "x" }, { "path": "p/output.log", "content": "y" } ] }),
            vec!["files[1].path"],
        ),
        (
            json!({ "project_id": PROJECT, "input_latex": "x", "files": [
            { "path": "main.tex", "content": "y" }, { "path": "output.aux", "content": "z" } ] }),
            vec!["files[0].path", "files[1].path"],
        ),
    ] {
        assert_eq!(
            fields(parse(body.clone(), &limits()).err().unwrap()),
            wanted,
            "{body}"
        );
    }
}

#[test]
fn requires_a_document_and_refuses_duplicates() {
    let body = json!({ "project_id": PROJECT });
    assert_eq!(
        fields(parse(body.clone(), &limits()).err().unwrap()),
        ["input_latex"]
    );
    let body = json!({ "project_id": PROJECT, "input_latex": "x", "files": [
        { "path": "a.tex", "content": "1" }, { "path": "a.tex", "content": "2" } ] });
    assert_eq!(
        fields(parse(body.clone(), &limits()).err().unwrap()),
        ["files[1].path"]
    );
}

#[test]
fn a_multipart_body_names_its_main_document_among_its_parts() {
    let upload = |path: &str| SourceFile {
        path: path.into(),
        content: b"x".to_vec(),
    };
    let metadata = json!({ "project_id": PROJECT, "engine": "xelatex" });
    let request = parse_multipart(
        metadata.clone(),
        vec![upload("main.tex"), upload("img/my figure.png")],
        &limits(),
    )
    .ok()
    .unwrap();
    assert_eq!(request.main, "main.tex");
    assert_eq!(request.engine, Engine::Xelatex);
    assert_eq!(request.files.len(), 2);

    let metadata = json!({ "project_id": PROJECT, "files": [{ "path": "b.png", "sha256": HASH }] });
    let request = parse_multipart(metadata, vec![upload("main.tex")], &limits())
        .ok()
        .unwrap();
    assert_eq!(request.files.len(), 1);
    assert_eq!(request.stored_files[0].path, "b.png");
    assert_eq!(request.stored_files[0].sha256.hex(), HASH);

    let metadata = json!({ "project_id": PROJECT, "main": "paper/a.tex" });
    let request = parse_multipart(metadata.clone(), vec![upload("paper/a.tex")], &limits())
        .ok()
        .unwrap();
    assert_eq!(request.main, "paper/a.tex");

    for (metadata, uploads, wanted) in [
        (
            json!({ "project_id": PROJECT }),
            vec![upload("a.tex")],
            vec!["main"],
        ),
        (
            json!({ "project_id": PROJECT, "input_latex": "x", "files": [] }),
            vec![upload("main.tex")],
            vec!["input_latex"],
        ),
        // The metadata names project files by hash; contents travel as parts.
        (
            json!({ "project_id": PROJECT, "files": [{ "path": "a.tex", "content": "x" }] }),
            vec![upload("main.tex")],
            vec!["files[0].content"],
        ),
        (
            json!({ "project_id": PROJECT, "files": [{ "path": "main.tex", "sha256": HASH }] }),
            vec![upload("main.tex")],
            vec!["files[0].path"],
        ),
        (
            json!({ "project_id": PROJECT, "main": "my paper.tex" }),
            vec![upload("my paper.tex")],
            vec!["main"],
        ),
        (
            json!({ "project_id": PROJECT }),
            vec![upload("main.tex"), upload("../x"), upload("main.tex")],
            vec!["files[1].path", "files[2].path"],
        ),
    ] {
        let mut names = fields(
            parse_multipart(metadata.clone(), uploads, &limits())
                .err()
                .unwrap(),
        );
        names.sort();
        assert_eq!(names, wanted, "{metadata}");
    }
}

#[test]
fn a_texlive_year_is_one_of_the_server_s_or_its_default() {
    let body = |year: Value| json!({ "project_id": PROJECT, "latex": "x", "texlive": year });
    assert_eq!(
        parse(body(json!("2022")), &limits()).ok().unwrap().texlive,
        "2022"
    );
    assert_eq!(
        parse(body(Value::Null), &limits()).ok().unwrap().texlive,
        "2024"
    );
    for wrong in [json!("2019"), json!(2022), json!("")] {
        let errors = parse(body(wrong), &limits()).err().unwrap();
        assert_eq!(errors[0].field, "texlive");
        assert!(
            errors[0].message.contains("2022, 2024"),
            "{}",
            errors[0].message
        );
    }
}

#[test]
fn an_engine_a_year_withholds_is_refused() {
    let body =
        json!({ "project_id": PROJECT, "latex": "x", "texlive": "2022", "engine": "lualatex" });
    let errors = parse(body, &limits()).err().unwrap();
    assert_eq!(fields(errors), ["engine"]);
    let body =
        json!({ "project_id": PROJECT, "latex": "x", "texlive": "2024", "engine": "lualatex" });
    assert!(parse(body, &limits()).is_ok());
}
