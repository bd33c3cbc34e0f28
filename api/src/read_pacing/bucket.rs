//! What an address, a network or the whole API may still read besides requests, and who may
//! read when it is spent.
//!
//! Each bucket has a reserve, a quarter of its burst refilled at its pace, that only
//! connections in good standing draw on once the bucket is spent: those whose address owes at
//! most [`IN_GOOD_STANDING`], whatever its networks owe (a neighbour's flood is not its own). An address's debt is forgiven
//! slowly ([`FORGIVEN`] a second), so what it sent besides requests stays against it for
//! minutes, while a client that sends requests owes nothing once they are read. Of the
//! connections in good standing, the one whose address owes least reads first: an address
//! owing `x` of its standing waits until the reserve holds that share of it. A flood never
//! touches a reserve; a party spread over many fresh addresses gets one small read from it per
//! address (a read from a reserve takes at most [`RESERVE_READ`] bytes) before each owes more
//! than a client that only sends requests, and then reads after it.

use tokio::time::Instant;

/// Bytes a second a network may send besides requests: a browser's control frames and
/// window updates are a few kilobytes a minute.
pub const RATE: f64 = 64.0 * 1024.0;
/// What a network may send besides requests before it is paced: room, too, for what HTTP/2
/// reads ahead of a few uploads (a stream's window, 1 MiB) before their handlers take it.
pub const BURST: f64 = 4.0 * 1024.0 * 1024.0;

/// What an address may owe and still be in good standing: a browser's control frames and a
/// request's head not yet given back.
pub const IN_GOOD_STANDING: f64 = 16.0 * 1024.0;
/// Bytes a second of an address's debt forgiven: more than a browser's control frames.
pub const FORGIVEN: f64 = 64.0;
/// The most one read takes from a reserve.
pub const RESERVE_READ: usize = 4096;

/// A part of the clients whose connections share a bucket: an address (an IPv6 /64, as the
/// API counts clients), the IPv4 /24 (IPv6 /48) around it, the /16 (/32) around that, as the connections are counted, and all of them
/// (a prefix of 0), so that one party's 256 /24s share four times one /24's pace, not 256
/// times, and a flood from many networks does not take the API's whole time either.
pub struct Level {
    pub v4: u8,
    pub v6: u8,
    rate: f64,
    burst: f64,
    /// Whether a spent bucket of this level holds its connections back; an address's only
    /// tells its standing (and is forgiven slowly), its /24 paces it.
    pub paces: bool,
}

pub const LEVELS: [Level; 4] = [
    Level {
        v4: 32,
        v6: 64,
        rate: FORGIVEN,
        burst: BURST,
        paces: false,
    },
    Level {
        v4: 24,
        v6: 48,
        rate: RATE,
        burst: BURST,
        paces: true,
    },
    Level {
        v4: 16,
        v6: 32,
        rate: 4.0 * RATE,
        burst: 4.0 * BURST,
        paces: true,
    },
    Level {
        v4: 0,
        v6: 0,
        rate: 16.0 * RATE,
        burst: 8.0 * BURST,
        paces: true,
    },
];

impl Level {
    fn reserve(&self) -> f64 {
        self.burst / 4.0
    }
}

/// What a part of the clients may still read, as of `at`.
pub struct Bucket {
    left: f64,
    /// What connections in good standing may still read once `left` is spent.
    reserve: f64,
    at: Instant,
}

impl Bucket {
    pub fn full(level: &Level, now: Instant) -> Bucket {
        Bucket {
            left: level.burst,
            reserve: level.reserve(),
            at: now,
        }
    }

    pub fn refill(&mut self, level: &Level, now: Instant) {
        let seconds = now.duration_since(self.at).as_secs_f64();
        self.left = (self.left + level.rate * seconds).min(level.burst);
        self.reserve = (self.reserve + level.rate * seconds).min(level.reserve());
        self.at = now;
    }

    pub fn is_full(&self, level: &Level) -> bool {
        self.left >= level.burst && self.reserve >= level.reserve()
    }

    pub fn owes(&self, level: &Level) -> f64 {
        level.burst - self.left
    }

    /// Charges or gives back. A read of a connection in good standing comes from the reserve
    /// once the bucket is spent, and what it gives back goes to the reserve first; a cost
    /// beyond what was read (a refused request) never comes from a reserve, which is for
    /// reading requests.
    pub fn change(&mut self, level: &Level, change: Change, in_good_standing: bool) {
        let in_good_standing = in_good_standing && level.paces;
        match change {
            Change::Read(bytes) if in_good_standing && self.left < 0.0 => self.reserve -= bytes,
            Change::Read(bytes) | Change::Cost(bytes) => self.left -= bytes,
            Change::GiveBack(bytes) => {
                let to_reserve = match in_good_standing {
                    true => bytes.min(level.reserve() - self.reserve).max(0.0),
                    false => 0.0,
                };
                self.reserve += to_reserve;
                self.left = (self.left + bytes - to_reserve).min(level.burst);
            }
            Change::Nothing => {}
        }
    }

    /// Whether a connection standing so may read, from the bucket or its reserve, or how
    /// many seconds it must wait.
    pub fn admit(&self, level: &Level, standing: Standing) -> Admission {
        if self.left >= 0.0 {
            return Admission::Read;
        }
        let until_left = -self.left / level.rate;
        if !standing.good {
            return Admission::Wait(until_left);
        }
        let needed = level.reserve() * standing.address_owes.max(0.0) / IN_GOOD_STANDING;
        if self.reserve >= needed {
            return Admission::FromReserve;
        }
        Admission::Wait(until_left.min((needed - self.reserve) / level.rate))
    }
}

/// What changes a bucket.
#[derive(Clone, Copy)]
pub enum Change {
    /// Bytes read from a connection.
    Read(f64),
    /// What a connection costs beyond its bytes: a request refused, a body frame smaller than
    /// a kilobyte.
    Cost(f64),
    /// Bytes that turned out to be a request's head or body.
    GiveBack(f64),
    /// Nothing: the connection only asks whether it may read.
    Nothing,
}

/// Where a connection stands below a level.
#[derive(Clone, Copy)]
pub struct Standing {
    /// Its address owes at most [`IN_GOOD_STANDING`].
    pub good: bool,
    /// What its address owes: who reads from a reserve first.
    pub address_owes: f64,
}

/// What a bucket lets a connection do.
pub enum Admission {
    Read,
    FromReserve,
    /// Seconds to wait.
    Wait(f64),
}
