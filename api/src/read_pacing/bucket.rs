//! What an address, a network or the whole API may still read besides requests, and who may
//! read when it is spent.
//!
//! Each bucket has a reserve, a quarter of its burst refilled at a quarter of its pace, that
//! only connections in good standing below it draw on once the bucket is spent: those whose
//! address and narrower networks owe at most [`IN_GOOD_STANDING`]. A flood drives its buckets
//! below nothing by its last reads (every connection that passed the check reads a chunk), but
//! it never touches a reserve, so a neighbour that sends only requests is read at once, and a
//! party spread over many clean addresses spends the reserve and then waits with everyone.

use tokio::time::Instant;

/// Bytes a second a network may send besides requests: a browser's control frames and
/// window updates are a few kilobytes a minute.
pub const RATE: f64 = 64.0 * 1024.0;
/// What a network may send besides requests before it is paced: room, too, for what HTTP/2
/// reads ahead of a few uploads (a stream's window, 1 MiB) before their handlers take it.
pub const BURST: f64 = 4.0 * 1024.0 * 1024.0;

/// What an address or network may owe and still be in good standing: a browser's control
/// frames and a request's head not yet given back.
pub const IN_GOOD_STANDING: f64 = 64.0 * 1024.0;

/// A part of the clients whose connections share a bucket: an address, the IPv4 /24 (IPv6
/// /48) around it, the /16 (/32) around that, as the connections are counted, and all of them
/// (a prefix of 0), so that one party's 256 /24s share four times one /24's pace, not 256
/// times, and a flood from many networks does not take the API's whole time either.
pub struct Level {
    pub v4: u8,
    pub v6: u8,
    rate: f64,
    burst: f64,
    /// Whether a spent bucket of this level holds its connections back; an address's only
    /// tells its standing, its /24 paces it.
    pub paces: bool,
}

pub const LEVELS: [Level; 4] = [
    Level {
        v4: 32,
        v6: 128,
        rate: RATE,
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
        self.reserve = (self.reserve + level.rate / 4.0 * seconds).min(level.reserve());
        self.at = now;
    }

    pub fn is_full(&self, level: &Level) -> bool {
        self.left >= level.burst && self.reserve >= level.reserve()
    }

    pub fn owes(&self, level: &Level) -> f64 {
        level.burst - self.left
    }

    /// Charges (`change` below zero) or gives back what a connection read. One in good
    /// standing reads from the reserve once the bucket is spent, and gives back to it first.
    pub fn change(&mut self, level: &Level, change: f64, in_good_standing: bool) {
        let in_good_standing = in_good_standing && level.paces;
        if in_good_standing && change < 0.0 && self.left < 0.0 {
            self.reserve += change;
            return;
        }
        let mut change = change;
        if in_good_standing && change > 0.0 {
            let to_reserve = change.min(level.reserve() - self.reserve).max(0.0);
            self.reserve += to_reserve;
            change -= to_reserve;
        }
        self.left = (self.left + change).min(level.burst);
    }

    /// Seconds a connection must wait before it reads again: until the bucket has something
    /// left, or, in good standing, its reserve has.
    pub fn wait(&self, level: &Level, in_good_standing: bool) -> f64 {
        if self.left >= 0.0 || (in_good_standing && self.reserve >= 0.0) {
            return 0.0;
        }
        let until_left = -self.left / level.rate;
        if in_good_standing {
            until_left.min(-self.reserve / (level.rate / 4.0))
        } else {
            until_left
        }
    }
}
