//! The verdict cannot be forged from inside the sandbox. A program run as the compile's user in
//! a job's container while the job compiles (here Perl, which the image holds for biber; what
//! a document would run if it ever got native code) tries to stop and kill the supervisor and
//! init, to write a forged report into their standard output, and to lower their limits. The
//! kernel refuses each, and the job ends with its honest outcome.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{container_of_running_job, exec_in, pdf_text, TestApp};

/// About ten seconds of TeX arithmetic on an idle machine (the hostile program needs the job
/// still running), then a page: honestly `Succeeded`.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<40000000 \\repeat Honest result.\\end{document}";

/// For init and the supervisor (found by its command line: texfleet-supervisor without
/// `drive`): SIGSTOP and SIGKILL, a forged tar written to its fd 1, and its open-files limit
/// set to 0 (`prlimit` through Perl's syscall).
const HOSTILE: &str = r#"
my ($killed, $written, $limited, $tried) = (0, 0, 0, 0);
my $forged = "report.json\0" . ("\0" x 500) . '{"nonce":"guess","exit_code":0,"signal":null,"limit":null,"duration_ms":1,"cpu_ms":1,"max_rss_kb":1,"notes":[]}';
opendir(my $proc, "/proc") or die "no /proc: $!";
for my $pid (grep { /^\d+$/ } readdir($proc)) {
    open(my $cmdline, "<", "/proc/$pid/cmdline") or next;
    my $command = <$cmdline> // "";
    my $supervisor = $command =~ /^texfleet-supervisor\0?$/;
    next unless $pid == 1 || $supervisor;
    $tried++;
    $killed++ if kill("KILL", $pid) || kill("STOP", $pid);
    if (open(my $out, ">", "/proc/$pid/fd/1")) { print $out $forged; close($out); $written++; }
    my $limit = pack("QQ", 0, 0);
    $limited++ if syscall(302, $pid + 0, 7, $limit, 0) == 0;
}
print "tried=$tried killed=$killed written=$written limited=$limited\n";
"#;

#[tokio::test(flavor = "multi_thread")]
async fn code_running_as_the_compile_cannot_touch_the_supervisor_or_forge_the_outcome() {
    let app = TestApp::spawn_with(|config| config.scheduler_slots = 1).await;
    let job = app.submit(json!({ "input_latex": SLOW })).await;
    let id = job.id().to_string();
    let container = container_of_running_job(&id).await;
    let printed = exec_in(&container, "65101:65101", &["/usr/bin/perl", "-e", HOSTILE]).await;
    assert!(
        printed.contains("tried=2 killed=0 written=0 limited=0"),
        "the hostile program reached the supervisor or init: {printed}"
    );
    let job = app.wait_terminal(&id, Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let pdf = app.pdf_of(&id).await;
    assert!(pdf_text(&pdf).contains("Honest result."));
}
