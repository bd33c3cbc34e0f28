//! A dump whose reads cannot be followed gives no verdict on its preamble. Its reads are what
//! the kernel saw it open (inotify), and the compile's user may hold 128 inotify instances in
//! all, across every sandbox of the host: on a busy host the watch cannot start, which is not
//! the preamble's doing. The next compile tries again, rather than finding it refused.
//!
//! Alone in its binary: it takes the compile's user's every instance, which would spoil the
//! dumps of tests running beside it.

use serde_json::json;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{succeeded_text, TestApp};

/// The uid the sandbox runs compiles as (the supervisor's `COMPILE_UID`).
const COMPILE_UID: &str = "65101";

/// A process of the compile's user holding every inotify instance the user may have, until
/// dropped.
struct EveryInstance(Child);

impl EveryInstance {
    fn take() -> EveryInstance {
        let ids = format!("--reuid={COMPILE_UID}");
        let group = format!("--regid={COMPILE_UID}");
        let mut child = Command::new("setpriv")
            .args([&ids, &group, "--clear-groups", "/usr/bin/python3", "-c"])
            .arg(
                "import ctypes, sys\n\
                 libc = ctypes.CDLL(None, use_errno=True)\n\
                 while libc.inotify_init1(0) >= 0: pass\n\
                 print(ctypes.get_errno(), flush=True)\n\
                 sys.stdin.read()\n",
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv runs");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "24",
            "stopped by EMFILE: every instance is taken"
        );
        EveryInstance(child)
    }
}

impl Drop for EveryInstance {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dump_whose_reads_cannot_be_followed_leaves_the_preamble_to_the_next_compile() {
    let app = TestApp::spawn().await;
    let document = |body: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\n\\usepackage{{amsmath}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let taken = EveryInstance::take();
    let unwatched = app.compile(document("First.")).await;
    drop(taken);
    assert!(succeeded_text(&app, &unwatched).await.contains("First."));
    let log = app.log(unwatched.id()).await;
    assert!(
        log.contains("keeping the preamble as a format: what it opens cannot be followed"),
        "{log}"
    );
    let second = app.compile(document("Second.")).await;
    assert_eq!(second["preamble_cache"], "miss", "dumped again: {second:#}");
    assert!(succeeded_text(&app, &second).await.contains("Second."));
    let third = app.compile(document("Third.")).await;
    assert_eq!(third["preamble_cache"], "hit", "{third:#}");
    assert!(succeeded_text(&app, &third).await.contains("Third."));
}
