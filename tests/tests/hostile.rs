//! The hostile-input suite: documents that try to escape, read, leak, write, exhaust or flood,
//! compiled on the real stack beside a normal document. Canaries are planted by `./dev/test`: a
//! secret in this process's environment (which the in-process scheduler shares) and a file on
//! the host. No canary may reach any PDF (streams decompressed), log or API response; every job
//! must end as expected within its limit; the normal job must succeed; no container may remain.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::{assert_container_removed, canary, pdf_bytes_inflated, pdf_text, TestApp};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

const TIMEOUT: u32 = 8;
/// The first line of the container's own /etc/passwd: must not be read by pdfTeX or XeTeX.
const PASSWD_MARKER: &str = "root:x:0:0";

struct Case {
    name: &'static str,
    engine: &'static str,
    document: String,
    /// Acceptable (status, error code) pairs; the code is None for Succeeded.
    expect: &'static [(&'static str, Option<&'static str>)],
    log_contains: Option<&'static str>,
    text_contains: Option<&'static str>,
    /// The document uses a primitive that reads files without kpathsea's openin check (pdfTeX's
    /// \pdfobj file, xdvipdfmx's pdf:fstream, Lua's io.open): it may read the container's own
    /// public files, though never the host's. See SECURITY.md, residual risks.
    reads_container_files: bool,
}

const SUCCEEDS: &[(&str, Option<&str>)] = &[("Succeeded", None)];
const COMPILE_ERROR: &[(&str, Option<&str>)] = &[("Failed", Some("compile_error"))];
const ANY_END: &[(&str, Option<&str>)] = &[("Succeeded", None), ("Failed", Some("compile_error"))];

fn doc(body: &str) -> String {
    format!("\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n")
}

fn case(
    name: &'static str,
    engine: &'static str,
    document: String,
    expect: &'static [(&'static str, Option<&'static str>)],
) -> Case {
    let reads_container_files = engine == "lualatex";
    Case {
        name,
        engine,
        document,
        expect,
        log_contains: None,
        text_contains: None,
        reads_container_files,
    }
}

fn cases(host_canary: &str) -> Vec<Case> {
    let lua = |code: &str| doc(&format!("\\directlua{{{code}}}"));
    let filler = "x".repeat(200);
    vec![
        // Shell escape, plain and obfuscated.
        Case { log_contains: Some("disabled"), ..case("write18", "pdflatex", doc("\\immediate\\write18{env > leak.tex}x"), SUCCEEDS) },
        case("input pipe", "pdflatex", doc("\\input|\"cat /etc/passwd\" "), COMPILE_ERROR),
        Case { log_contains: Some("disabled"), ..case("write18 via catcodes", "pdflatex", doc("{\\catcode`\\!=0 !immediate!write18{cat /etc/passwd > p.tex}}x"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("write18 via ^^", "pdflatex", doc("\\immediate\\^^77rite18{uname -a > u.tex}x"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("write18 via csname", "pdflatex", doc("\\csname immediate\\endcsname\\csname write\\endcsname18{id}x"), SUCCEEDS) },
        Case { log_contains: Some("disabled"), ..case("write18 from xelatex", "xelatex", doc("\\immediate\\write18{id > i.tex}x"), SUCCEEDS) },
        case("eps through repstopdf", "pdflatex",
            "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\\includegraphics{evil.eps}\\end{document}".into(), ANY_END),
        // File reads.
        case("input absolute path", "pdflatex", doc("\\input{/etc/passwd}"), COMPILE_ERROR),
        case("input traversal", "pdflatex", doc("\\input{../../../../../etc/passwd}"), COMPILE_ERROR),
        case("input host canary", "pdflatex", doc(&format!("\\input{{{host_canary}}}")), COMPILE_ERROR),
        case("openin", "pdflatex", doc("\\newread\\r\\openin\\r=/etc/passwd \\ifeof\\r closed\\else\\read\\r to\\x \\x\\fi"), ANY_END),
        case("verbatiminput", "pdflatex",
            "\\documentclass{article}\\usepackage{verbatim}\\begin{document}\\verbatiminput{/etc/passwd}\\end{document}".into(), ANY_END),
        case("lstinputlisting", "pdflatex",
            "\\documentclass{article}\\usepackage{listings}\\begin{document}\\lstinputlisting{/etc/passwd}x\\end{document}".into(), ANY_END),
        Case { reads_container_files: true, ..case("pdfobj file", "pdflatex",
            doc(&format!("\\immediate\\pdfobj stream file {{{host_canary}}}\\pdfcatalog{{/Leak \\the\\pdflastobj\\space 0 R}}x")), ANY_END) },
        case("pdffiledump", "pdflatex", doc("\\edef\\x{\\pdffiledump length 400 {/etc/passwd}}[\\x]"), ANY_END),
        Case { reads_container_files: true, ..case("xetex fstream", "xelatex",
            doc(&format!("\\special{{pdf:fstream @leak ({host_canary})}}\\special{{pdf:put @catalog <</Leak @leak>>}}x")), ANY_END) },
        case("xetex input absolute", "xelatex", doc("\\input{/etc/passwd}"), COMPILE_ERROR),
        case("bibtex database", "pdflatex", doc("\\cite{x}\\bibliographystyle{plain}\\bibliography{/etc/passwd}"), ANY_END),
        Case { text_contains: Some("no-canary"), ..case("lua io.open host file", "lualatex",
            lua(&format!("local f = io.open('{host_canary}') tex.print(f and f:read('*a') or 'no-canary')")), SUCCEEDS) },
        case("lua reads process environments", "lualatex",
            lua("tex.print('environ:') for _, p in ipairs({'/proc/self/environ', '/proc/1/environ'}) do local f = io.open(p) if f then tex.print(-2, (f:read('*a'):gsub(string.char(0), ' '))) end end"), SUCCEEDS),
        // Commands and sockets from Lua.
        Case { text_contains: Some("exec=nil"), ..case("lua os.execute", "lualatex",
            lua("tex.print('exec=' .. tostring(os.execute('cat /etc/passwd > p.tex')))"), SUCCEEDS) },
        Case { text_contains: Some("no-popen"), ..case("lua io.popen", "lualatex",
            lua("local ok, p = pcall(io.popen, 'env') tex.print((ok and p) and p:read('*a') or 'no-popen')"), SUCCEEDS) },
        Case { text_contains: Some("no-socket"), ..case("lua socket", "lualatex",
            lua("local ok = pcall(require, 'socket') tex.print(ok and 'socket-loaded' or 'no-socket')"), SUCCEEDS) },
        Case { text_contains: Some("forks-done"), ..case("fork attempts", "lualatex",
            lua("for i = 1, 300 do pcall(os.execute, 'sleep 60 &') end tex.print('forks-done')"), SUCCEEDS) },
        // Environment leaks.
        Case { text_contains: Some("ENV=nil HOST=nil"), ..case("lua getenv", "lualatex",
            lua("tex.print('ENV=' .. tostring(os.getenv('CANARY_SECRET')) .. ' HOST=' .. tostring(os.getenv('HOSTNAME')))"), SUCCEEDS) },
        case("kpathsea variable", "lualatex", lua("tex.print(-2, tostring(kpse.var_value('CANARY_SECRET')))"), SUCCEEDS),
        case("dollar expansion in a file name", "pdflatex", doc("\\input{$CANARY_SECRET}"), COMPILE_ERROR),
        // Writes outside the work directory.
        Case { log_contains: Some("write on file"), ..case("openout absolute", "pdflatex",
            doc("\\newwrite\\w\\immediate\\openout\\w=/tmp/evil.tex\\immediate\\write\\w{x}\\immediate\\closeout\\w x"), COMPILE_ERROR) },
        Case { log_contains: Some("write on file"), ..case("openout traversal", "pdflatex",
            doc("\\newwrite\\w\\immediate\\openout\\w=../evil.tex\\immediate\\write\\w{x}\\immediate\\closeout\\w x"), COMPILE_ERROR) },
        // The supervisor's resource limits, as TeX sees them.
        Case { text_contains: Some("core=0 nofile=256"), ..case("resource limits", "lualatex",
            lua("local t, n = {}, 0 for l in io.lines('/proc/self/limits') do n = n + 1 t[n] = l:gsub(' +', ' ') end local s = table.concat(t, ';') \
                 tex.print((s:find('Max core file size 0 0 bytes', 1, true) and 'core=0' or 'core-other') .. ' ' .. \
                 (s:find('Max open files 256 256 files', 1, true) and 'nofile=256' or 'nofile-other'))"), SUCCEEDS) },
        Case { text_contains: Some("open-files-capped"), ..case("open files flood", "lualatex",
            lua("local n, keep = 0, {} for i = 1, 1000 do local f = io.open('f' .. i .. '.txt', 'w') if not f then break end keep[i] = f n = n + 1 end for _, f in ipairs(keep) do f:close() end tex.print(n < 256 and 'open-files-capped' or 'uncapped ' .. n)"), SUCCEEDS) },
        // Exhaustion and floods.
        case("cpu loop", "pdflatex", "\\loop\\iftrue\\repeat".into(), &[("TimedOut", Some("timeout"))]),
        case("memory bomb", "lualatex",
            lua("local t = {} for i = 1, 1000 do t[i] = string.rep('x', 67108864 + i) end"), &[("Failed", Some("memory_limit"))]),
        case("tex memory", "pdflatex", doc("\\def\\a{x\\a}\\edef\\b{\\a}"), COMPILE_ERROR),
        case("log flood", "pdflatex", doc(&format!("\\loop\\message{{{filler}}}\\iftrue\\repeat")),
            &[("Failed", Some("output_limit"))]),
        case("disk flood", "pdflatex",
            doc(&format!("\\newwrite\\w\\immediate\\openout\\w=big.txt \\loop\\immediate\\write\\w{{{filler}}}\\iftrue\\repeat")),
            &[("Failed", Some("output_limit"))]),
        case("file count flood", "pdflatex",
            doc("\\newcount\\n\\newwrite\\w\\loop\\immediate\\openout\\w=f\\the\\n.txt\\immediate\\closeout\\w\\advance\\n1 \\iftrue\\repeat"),
            &[("Failed", Some("output_limit")), ("TimedOut", Some("timeout"))]),
        case("runaway pages", "pdflatex",
            doc(&format!("\\pdfcompresslevel=0 \\pdfobjcompresslevel=0 \\loop {} \\newpage\\iftrue\\repeat", "lorem ipsum ".repeat(150))),
            &[("Failed", Some("output_limit")), ("TimedOut", Some("timeout"))]),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_documents_leak_nothing_and_end_as_expected() {
    let (secret, host_file) = canary();
    let app = TestApp::spawn_with(|config| {
        config.sandbox_memory_mb = 256;
        config.max_log_bytes = 1024 * 1024;
        config.max_pdf_bytes = 2 * 1024 * 1024;
        config.kill_grace_seconds = 5;
    })
    .await;
    let cases = cases(&host_file);
    assert!(
        cases.len() >= 25,
        "the suite must hold at least 25 hostile documents"
    );
    let eps =
        "%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n(/etc/passwd) (r) file pop\nshowpage\n";
    // Sent with every document: latexmk runs with -norc, so reading it would fail every job.
    let latexmkrc = "die \"latexmkrc-was-read\\n\";\n$pdflatex = 'pdflatex -shell-escape %O %S';\n";

    let mut submitted = Vec::new();
    for case in &cases {
        let job = app
            .submit(json!({ "input_latex": case.document, "engine": case.engine, "timeout_seconds": TIMEOUT,
                            "files": [{ "path": "evil.eps", "content": eps }, { "path": "latexmkrc", "content": latexmkrc }] }))
            .await;
        submitted.push(job["id"].as_str().unwrap().to_string());
    }
    let normal = app
        .submit(json!({ "input_latex": texfleet_e2e::HELLO }))
        .await;

    let mut failures = Vec::new();
    for (case, id) in cases.iter().zip(&submitted) {
        let job = app.wait_terminal(id, Duration::from_secs(300)).await;
        if let Err(problem) = check_case(&app, case, &job, &secret).await {
            failures.push(format!("{}: {problem}\n{job:#}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    let normal = app
        .wait_terminal(normal["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(normal["status"], "Succeeded", "{normal:#}");
    for id in submitted
        .iter()
        .chain([normal["id"].as_str().unwrap().to_string()].iter())
    {
        assert_container_removed(id).await;
    }
}

async fn check_case(app: &TestApp, case: &Case, job: &Value, secret: &str) -> Result<(), String> {
    let status = job["status"].as_str().unwrap();
    let code = job["error"]["code"].as_str();
    if !case.expect.iter().any(|(s, c)| *s == status && *c == code) {
        return Err(format!(
            "ended {status} {code:?}, expected one of {:?}",
            case.expect
        ));
    }
    let started = OffsetDateTime::parse(job["started_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let finished = OffsetDateTime::parse(job["finished_at"].as_str().unwrap(), &Rfc3339).unwrap();
    let limit = f64::from(TIMEOUT + app.config.kill_grace_seconds) + 5.0;
    if (finished - started).as_seconds_f64() > limit {
        return Err(format!(
            "took {} s, more than {limit} s",
            (finished - started).as_seconds_f64()
        ));
    }

    let id = job["id"].as_str().unwrap();
    let mut exposed: Vec<(String, Vec<u8>)> =
        vec![("job JSON".into(), job.to_string().into_bytes())];
    let log = app.get(&format!("/compile/{id}/log")).await;
    let log_text = if log.status() == 200 {
        log.text().await.unwrap()
    } else {
        String::new()
    };
    if let Some(expected) = case.log_contains {
        if !log_text.contains(expected) {
            return Err(format!("log lacks {expected:?}"));
        }
    }
    exposed.push(("log".into(), log_text.into_bytes()));
    if status == "Succeeded" {
        let pdf = app
            .get(&format!("/compile/{id}/pdf"))
            .await
            .bytes()
            .await
            .unwrap()
            .to_vec();
        let text = pdf_text(&pdf);
        if let Some(expected) = case.text_contains {
            if !text.contains(expected) {
                return Err(format!("PDF text lacks {expected:?}: {text:?}"));
            }
        }
        exposed.push(("PDF text".into(), text.into_bytes()));
        exposed.push(("PDF streams".into(), pdf_bytes_inflated(&pdf)));
    }
    for (place, bytes) in &exposed {
        let haystack = String::from_utf8_lossy(bytes);
        if haystack.contains(secret) {
            return Err(format!("the canary secret leaked into the {place}"));
        }
        if !case.reads_container_files && haystack.contains(PASSWD_MARKER) {
            return Err(format!("/etc/passwd leaked into the {place}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_file_paths_are_refused_before_anything_is_queued() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let paths = [
        "../escape.tex",
        "/etc/passwd",
        "a/../../b.tex",
        "a/./b.tex",
        "nul\u{0}byte.tex",
        "new\nline.tex",
        "tab\there.tex",
        "$(id).tex",
        "`id`.tex",
        "a;b.tex",
        "-shell-escape.tex",
        ".latexmkrc",
        "dir/.hidden",
        "with space.tex",
        "back\\slash.tex",
        "main.tex",
        "output.pdf",
        "trailing/",
        "",
    ];
    for path in paths {
        let response = app
            .post_compile(&json!({ "project_id": app.project_id, "input_latex": "x",
                                   "files": [{ "path": path, "content": "x" }] }))
            .await;
        assert_eq!(response.status(), 422, "{path:?} was accepted");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["field"], "files[0].path",
            "{path:?}: {body:#}"
        );
    }
    let many: Vec<Value> = (0..=texfleet_core::validate::MAX_FILES)
        .map(|i| json!({ "path": format!("f{i}.tex"), "content": "x" }))
        .collect();
    let response = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": "x", "files": many }))
        .await;
    assert_eq!(response.status(), 422);
    let client = app.pool.get().await.unwrap();
    let jobs: i64 = client
        .query_one("SELECT count(*) FROM jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 0, "a refused request queued a job");
}
