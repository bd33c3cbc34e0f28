use super::*;

fn allowed(line: &str) -> Allowed {
    check(line.as_bytes()).unwrap_or_else(|why| panic!("{line:?}: {why}"))
}

fn refused(line: &str) -> String {
    match check(line.as_bytes()) {
        Ok(allowed) => panic!("{line:?} was allowed: {allowed:?}"),
        Err(why) => why,
    }
}

#[test]
fn minteds_commands_run_its_script_with_python_and_nothing_else() {
    let run = allowed(
        "latexminted 'batch'  '--timestamp' '20250309123456Z' '0CC175B9C0F1B6A831C399E269772661'",
    );
    assert_eq!(run.path, PYTHON);
    assert_eq!(
        run.argv,
        [
            "python3",
            "-I",
            LATEXMINTED,
            "batch",
            "--timestamp",
            "20250309123456Z",
            "0CC175B9C0F1B6A831C399E269772661"
        ]
    );
    assert_eq!(run.may_start, [KPSEWHICH]);
    allowed("latexminted 'config' '--timestamp' '202503091234' '--debug' '0CC175B9C0F1B6A831C399E269772661'");
    for line in [
        "latexminted 'batch' '--timestamp' '20250309123456Z' '0cc175b9c0f1b6a831c399e269772661'",
        "latexminted 'batch' '--timestamp' 'now' '0CC175B9C0F1B6A831C399E269772661'",
        "latexminted 'lexers' '--timestamp' '20250309123456Z' '0CC175B9C0F1B6A831C399E269772661'",
        "latexminted 'batch' '--timestamp' '20250309123456Z' '0CC175B9C0F1B6A831C399E269772661' '--debug'",
        "latexminted '--version'",
        "latexminted 'batch' '--timestamp' '20250309123456Z' '/etc/passwd'",
    ] {
        refused(line);
    }
}

#[test]
fn kpsewhich_finds_files_and_a_few_settings_only() {
    let run = allowed("kpsewhich 'article.cls'");
    assert_eq!(run.path, KPSEWHICH);
    assert_eq!(run.argv, ["kpsewhich", "article.cls"]);
    assert!(run.may_start.is_empty());
    allowed("kpsewhich '-var-value=TEXMFHOME'");
    allowed("kpsewhich '--var-value=openout_any'");
    allowed("kpsewhich '--progname=dvipdfm' '--format=''other text files' 'config'");
    allowed("kpsewhich '-all' 'figures/a.png'");
    for line in [
        "kpsewhich '-var-value=PATH'",
        "kpsewhich '-var-value=SOURCE_DATE_EPOCH'",
        "kpsewhich '--expand-var=$HOME'",
        "kpsewhich '-expand-path=$TEXMF'",
        "kpsewhich '-var-brace-value=HOME'",
        "kpsewhich '-cnf-line=shell_escape=t'",
        "kpsewhich '-mktex=tfm' 'x.tfm'",
        "kpsewhich '-interactive'",
        "kpsewhich '-path=/etc' 'passwd'",
        "kpsewhich '/etc/passwd'",
        "kpsewhich '../../etc/passwd'",
        "kpsewhich '-var-v=PATH'",
        "kpsewhich '-progname=$(id)'",
        "kpsewhich '$SELFAUTOPARENT/etc/passwd'",
        "kpsewhich 'x{a,b}'",
        "kpsewhich '!!x'",
    ] {
        refused(line);
    }
}

#[test]
fn l3sys_query_answers_pwd_and_ls_of_the_job() {
    let run = allowed("l3sys-query 'pwd'");
    assert_eq!(run.path, TEXLUA);
    assert_eq!(run.argv, ["texlua", L3SYS_QUERY, "pwd"]);
    allowed("l3sys-query 'ls' '--recursive' '*.png'");
    allowed("l3sys-query 'ls' '--sort=date' '--exclude=*.aux' 'figures/*'");
    for line in [
        "l3sys-query 'ls' '/etc'",
        "l3sys-query 'ls' '../*'",
        "l3sys-query 'ls' 'a' 'b'",
        "l3sys-query 'rm' 'x'",
        "l3sys-query 'pwd' 'x'",
        "l3sys-query 'ls' '--exclude=/etc'",
    ] {
        refused(line);
    }
}

#[test]
fn programs_off_the_list_are_refused_by_name_and_by_path() {
    for line in [
        "sh '-c' 'id'",
        "bash",
        "rm '-rf' '/'",
        "/usr/bin/kpsewhich 'x'",
        "./kpsewhich 'x'",
        "makeindex 'x.idx'",
        "repstopdf 'a.eps'",
        "python3 '-c' 'print(1)'",
        "latexminted.py",
    ] {
        assert!(
            refused(line).contains("not a program") || refused(line).contains("runs into"),
            "{line}"
        );
    }
    assert_eq!(commands_setting(), "latexminted,kpsewhich,l3sys-query");
    assert_eq!(executables(), [SHELL, PYTHON, KPSEWHICH, TEXLUA]);
}
