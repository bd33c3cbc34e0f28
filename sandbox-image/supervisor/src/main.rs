//! `texfleet-supervisor`: the program every sandbox container runs (under Docker's init).
//!
//! - no argument: supervise one job ([`supervise`]): read the [`texfleet_sandbox::JobSpec`]
//!   from stdin, start the compile driver as another user, hold the deadline, and write the
//!   report and the outputs to stdout as a tar archive (the protocol is in `lib.rs`);
//! - `drive`: the compile driver itself ([`driver`]), started only by the supervisor;
//! - `check`: examine every isolation layer from inside ([`check`]);
//! - `convert-eps`: convert one figure for xdvipdfmx ([`driver::eps::convert_for_xdvipdfmx`]).
//!
//! The supervisor's own privileges are in [`privileges`], what confines the compile in
//! [`confine`], how programs are started (by argument vector, never a shell) in
//! [`process`], and what the driver hands the supervisor for the next compile in
//! [`handover`]. The scheduler keeps its own, later deadline as the outer guard and re-checks
//! everything this program says.

mod check;
mod confine;
mod driver;
mod handover;
mod outputs;
mod privileges;
mod process;
mod supervise;

use std::io::{self, Read};

/// Largest job spec accepted on stdin (sources are base64 inside JSON).
pub const MAX_SPEC_BYTES: u64 = 128 * 1024 * 1024;

fn main() {
    let mode = std::env::args().nth(1);
    let result = match mode.as_deref() {
        Some(texfleet_sandbox::CHECK_ARG) => check::run(),
        Some(supervise::DRIVE_ARG) => driver::run(),
        Some(check::COMPILE_SIDE_ARG) => check::run_compile_side(),
        Some(driver::eps::CONVERT_ARG) => driver::eps::convert_for_xdvipdfmx(),
        _ => supervise::run(),
    };
    if let Err(error) = result {
        eprintln!("texfleet-supervisor: {error}");
        std::process::exit(2);
    }
}

/// One JSON value from stdin; it is read as a stream so that no EOF is needed after it.
fn read_stdin_json<T: serde::de::DeserializeOwned>() -> io::Result<T> {
    let stdin = io::stdin().lock().take(MAX_SPEC_BYTES);
    let mut values = serde_json::Deserializer::from_reader(stdin).into_iter::<T>();
    match values.next() {
        Some(value) => value.map_err(io::Error::other),
        None => Err(io::Error::other("no spec on stdin")),
    }
}
