//! Two users in one container. The container starts the supervisor as root whose bounding set
//! holds only `SETUID`, `SETGID` and `KILL` (see the scheduler's `isolation.rs`). The
//! supervisor at once becomes [`SUPERVISOR_UID`] keeping exactly those three, and makes
//! itself non-dumpable; every process of the compile runs as [`COMPILE_UID`] with no
//! capability at all. A different uid is what keeps the compile from signalling the
//! supervisor, lowering its limits with `prlimit`, or writing into its stdout through
//! `/proc/<pid>/fd/1`: the kernel refuses each across uids, and non-dumpable makes the
//! supervisor's `/proc` entries root's.

use caps::{CapSet, Capability, CapsHashSet};
use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};
use std::io;
use texfleet_sandbox::{COMPILE_UID, SUPERVISOR_UID};

/// What the supervisor keeps: switching the compile's uid, and killing what the compile left.
const SUPERVISOR_CAPABILITIES: [Capability; 3] = [
    Capability::CAP_SETUID,
    Capability::CAP_SETGID,
    Capability::CAP_KILL,
];

/// Becomes [`SUPERVISOR_UID`] with exactly [`SUPERVISOR_CAPABILITIES`], non-dumpable.
pub fn become_supervisor() -> io::Result<()> {
    if !Uid::current().is_root() {
        return Err(io::Error::other(format!(
            "the supervisor must start as root (with only SETUID, SETGID and KILL), not as uid {}",
            Uid::current()
        )));
    }
    // Keep the permitted set across the change of uid away from root.
    nix::sys::prctl::set_keepcaps(true).map_err(io::Error::other)?;
    switch_user(SUPERVISOR_UID)?;
    nix::sys::prctl::set_keepcaps(false).map_err(io::Error::other)?;
    let keep: CapsHashSet = SUPERVISOR_CAPABILITIES.into_iter().collect();
    for set in [CapSet::Permitted, CapSet::Effective] {
        caps::set(None, set, &keep).map_err(io::Error::other)?;
    }
    caps::clear(None, CapSet::Inheritable).map_err(io::Error::other)?;
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::other)
}

/// In a child of the supervisor, before it executes anything: [`COMPILE_UID`] and no
/// capabilities. The bounding set cannot be emptied without `SETPCAP`; `no-new-privileges`
/// and an image without setuid or file-capability binaries leave it unreachable.
pub fn become_compile() -> io::Result<()> {
    switch_user(COMPILE_UID)?;
    for set in [CapSet::Effective, CapSet::Permitted, CapSet::Inheritable] {
        caps::clear(None, set).map_err(io::Error::other)?;
    }
    // gVisor has no ambient set (the call is refused); elsewhere it must be emptied.
    if caps::clear(None, CapSet::Ambient).is_err()
        && caps::read(None, CapSet::Ambient).is_ok_and(|set| !set.is_empty())
    {
        return Err(io::Error::other(
            "the ambient capabilities could not be cleared",
        ));
    }
    // A change of uid leaves a process non-dumpable, its /proc entries root's, until it
    // executes a program; the compile may own its /proc entries (its OOM preference).
    nix::sys::prctl::set_dumpable(true).map_err(io::Error::other)
}

fn switch_user(uid: u32) -> io::Result<()> {
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(uid));
    setgroups(&[]).map_err(io::Error::other)?;
    setresgid(gid, gid, gid).map_err(io::Error::other)?;
    setresuid(uid, uid, uid).map_err(io::Error::other)
}
