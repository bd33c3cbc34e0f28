//! What an address, a network or the whole API may still read besides requests, how clean
//! each is, and who may read when a network is spent.
//!
//! Each bucket of a network has a reserve, a quarter of its burst refilled at its pace, that
//! only connections in good standing draw on once the bucket is spent: those whose address
//! owes at most [`IN_GOOD_STANDING`], whatever its networks owe (a neighbour's flood is not
//! its own). What every part sent besides requests is also counted apart, forgiven slowly
//! ([`Level::forgiven`]): it stays against an address for minutes, against a /24 that carries a
//! flood spread thin for as long as the flood goes on, while a client that sends requests
//! owes nothing once they are read. Of the connections in good standing, the one whose
//! address and networks below the level are cleanest reads first: a connection ranked `x`
//! (from 0, clean, to 1) waits until the reserve holds that share of it. A flood never touches
//! a reserve; a party spread over many fresh addresses gets one small read from it per
//! address (a read from a reserve takes at most [`RESERVE_READ`] bytes), and once its /24s
//! carry its flood, its fresh addresses read after the clients of clean /24s.
//! That holds by arithmetic where a network has at most 256 sub-networks (IPv4): forgiven
//! together, they cannot read a quarter of its refill. A network with more (an IPv6 /32's
//! 65,536 /48s) forgives them together no faster than [`FORGIVEN_AT_FULL_RATE`] of them.
//! A part first seen while it holds that many, or while a network around it is unclean,
//! starts owing: the fresh addresses and /24s of networks that carry a flood read after the
//! clients those networks know, whatever the networks owe. What a part owes is capped at
//! twice its clean allowance, so a network is clean again minutes after its flood ends.

use tokio::time::Instant;

/// Bytes a second a /24 may send besides requests: a browser's control frames and window
/// updates are a few kilobytes a minute.
pub const RATE: f64 = 64.0 * 1024.0;
/// What a /24 may send besides requests before it is paced: room, too, for what HTTP/2 reads
/// ahead of a few uploads (a stream's window, 1 MiB) before their handlers take it.
pub const BURST: f64 = 4.0 * 1024.0 * 1024.0;

/// What an address may owe and still be in good standing: a browser's control frames and a
/// request's head not yet given back.
pub const IN_GOOD_STANDING: f64 = 16.0 * 1024.0;
/// The most one read takes from a reserve.
pub const RESERVE_READ: usize = 4096;

/// How many sub-networks of a network are forgiven at their full rate at once: an IPv4
/// network's all (a /16's /24s, a /24's addresses). More, as the 65,536 /48s of an IPv6 /32,
/// share that forgiveness, so that a party holding a whole IPv6 network gets no more clean
/// reads from its reserve than one holding an IPv4 network.
pub const FORGIVEN_AT_FULL_RATE: usize = 256;

/// A part of the clients whose connections share a bucket: an address (an IPv6 /64, as the
/// API counts clients), the IPv4 /24 (IPv6 /48) around it, the /16 (/32) around that, as the
/// connections are counted, and all of them (a prefix of 0), so that one party's 256 /24s
/// share four times one /24's pace, not 256 times, and a flood from many networks does not
/// take the API's whole time either.
pub struct Level {
    pub v4: u8,
    pub v6: u8,
    /// How fast the part's connections are read besides requests; an address has none: its
    /// /24 paces it.
    pub pace: Option<Pace>,
    /// What the part may owe, forgiven at [`Level::forgiven`], and still count as clean; it
    /// owes at most twice that.
    clean: f64,
    /// Bytes a second of what the part owes forgiven: more than a browser's control frames,
    /// at an address, and than a few browsers', at a network.
    pub forgiven: f64,
}

/// How fast a network is read besides requests.
pub struct Pace {
    rate: f64,
    burst: f64,
}

pub const LEVELS: [Level; 4] = [
    Level {
        v4: 32,
        v6: 64,
        pace: None,
        clean: IN_GOOD_STANDING,
        forgiven: 64.0,
    },
    Level {
        v4: 24,
        v6: 48,
        pace: Some(Pace {
            rate: RATE,
            burst: BURST,
        }),
        clean: 4.0 * IN_GOOD_STANDING,
        forgiven: 256.0,
    },
    Level {
        v4: 16,
        v6: 32,
        pace: Some(Pace {
            rate: 4.0 * RATE,
            burst: 4.0 * BURST,
        }),
        clean: 16.0 * IN_GOOD_STANDING,
        forgiven: 1024.0,
    },
    Level {
        v4: 0,
        v6: 0,
        pace: Some(Pace {
            rate: 16.0 * RATE,
            burst: 8.0 * BURST,
        }),
        clean: 64.0 * IN_GOOD_STANDING,
        forgiven: 4096.0,
    },
];

impl Pace {
    fn reserve(&self) -> f64 {
        self.burst / 4.0
    }
}

/// What a part of the clients owes and may still read, as of `at`.
pub struct Bucket {
    /// What the part sent besides requests, forgiven slowly.
    owes: f64,
    /// What a network may still read besides requests.
    left: f64,
    /// What connections in good standing may still read once `left` is spent.
    reserve: f64,
    at: Instant,
    /// The seconds of forgiveness at the full rate its sub-networks have had: as many as have
    /// passed while it holds at most [`FORGIVEN_AT_FULL_RATE`] of them, fewer beyond.
    clock: f64,
    /// Its network's `clock` when it was last forgiven.
    forgiven_to: f64,
    /// How many of its sub-networks have a bucket.
    pub children: usize,
    /// When a connection last used it.
    pub used: Instant,
}

/// The network a bucket's part is in, as the bucket is brought up to date or made.
#[derive(Clone, Copy)]
pub struct Around {
    clock: f64,
    /// It holds [`FORGIVEN_AT_FULL_RATE`] sub-networks, or it or a network around it (below
    /// all clients, which is no one party) owes all it may owe clean: a part first seen in it
    /// is a newcomer to a crowd or a flood.
    for_newcomers: bool,
}

impl Bucket {
    /// The bucket of a part first seen now, in a network `around` it (None for all clients). A
    /// part first seen in a crowded or unclean network starts owing a quarter of what it may
    /// owe clean: it reads from the reserves after the parts those networks have known clean.
    pub fn new(level: &Level, now: Instant, around: Option<Around>) -> Bucket {
        let (left, reserve) = level
            .pace
            .as_ref()
            .map_or((0.0, 0.0), |pace| (pace.burst, pace.reserve()));
        let newcomer = around.is_some_and(|around| around.for_newcomers);
        Bucket {
            owes: if newcomer { level.clean / 4.0 } else { 0.0 },
            left,
            reserve,
            at: now,
            clock: 0.0,
            forgiven_to: around.map_or(0.0, |around| around.clock),
            children: 0,
            used: now,
        }
    }

    /// Brings the bucket up to `now`, its network (None for all clients) already brought up.
    pub fn refill(&mut self, level: &Level, now: Instant, around: Option<Around>) {
        let seconds = now.duration_since(self.at).as_secs_f64();
        let forgiving = match around {
            Some(around) => (around.clock - self.forgiven_to).max(0.0),
            None => seconds,
        };
        self.forgiven_to = around.map_or(0.0, |around| around.clock);
        self.owes = (self.owes - level.forgiven * forgiving).max(0.0);
        if let Some(pace) = &level.pace {
            self.left = (self.left + pace.rate * seconds).min(pace.burst);
            self.reserve = (self.reserve + pace.rate * seconds).min(pace.reserve());
        }
        let share = FORGIVEN_AT_FULL_RATE as f64 / self.children.max(FORGIVEN_AT_FULL_RATE) as f64;
        self.clock += seconds * share;
        self.at = now;
    }

    /// What its sub-networks see of it, in a network `around` it (None for all clients).
    pub fn around(&self, level: &Level, around: Option<Around>) -> Around {
        Around {
            clock: self.clock,
            for_newcomers: self.children >= FORGIVEN_AT_FULL_RATE
                || (around.is_some() && self.owes >= level.clean)
                || around.is_some_and(|around| around.for_newcomers),
        }
    }

    /// Whether the bucket is as good as new: it need not be kept.
    pub fn is_full(&self, level: &Level) -> bool {
        self.owes <= 0.0
            && level
                .pace
                .as_ref()
                .is_none_or(|pace| self.left >= pace.burst && self.reserve >= pace.reserve())
    }

    /// What the part owes, forgiven slowly.
    pub fn owes(&self) -> f64 {
        self.owes
    }

    /// How far the part is from clean: 0 clean, 1 owing all it may and more.
    pub fn share_owed(&self, level: &Level) -> f64 {
        (self.owes / level.clean).min(1.0)
    }

    /// Charges or gives back. A read comes from the reserve only where the connection was let
    /// read from it; what a connection in good standing gives back goes to the reserve first;
    /// a cost beyond what was read (a refused request) never comes from a reserve, which is
    /// for reading requests.
    pub fn change(&mut self, level: &Level, change: Change, in_good_standing: bool) {
        match change {
            Change::Read(bytes) | Change::ReadFromReserve(bytes) | Change::Cost(bytes) => {
                self.owes = (self.owes + bytes).min(2.0 * level.clean)
            }
            Change::GiveBack(bytes) => self.owes = (self.owes - bytes).max(0.0),
            Change::Nothing => {}
        }
        let Some(pace) = &level.pace else {
            return;
        };
        match change {
            Change::ReadFromReserve(bytes) => self.reserve -= bytes,
            Change::Read(bytes) | Change::Cost(bytes) => self.left -= bytes,
            Change::GiveBack(bytes) => {
                let to_reserve = match in_good_standing {
                    true => bytes.min(pace.reserve() - self.reserve).max(0.0),
                    false => 0.0,
                };
                self.reserve += to_reserve;
                self.left = (self.left + bytes - to_reserve).min(pace.burst);
            }
            Change::Nothing => {}
        }
    }

    /// Whether a connection standing so may read, from the bucket or its reserve, or how
    /// many seconds it must wait.
    pub fn admit(&self, pace: &Pace, standing: Standing) -> Admission {
        if self.left >= 0.0 {
            return Admission::Read;
        }
        let until_left = -self.left / pace.rate;
        if !standing.good {
            return Admission::Wait(until_left);
        }
        let needed = pace.reserve() * standing.rank;
        if self.reserve >= needed {
            return Admission::FromReserve;
        }
        Admission::Wait(until_left.min((needed - self.reserve) / pace.rate))
    }
}

/// What changes a bucket.
#[derive(Clone, Copy)]
pub enum Change {
    /// Bytes read from a connection.
    Read(f64),
    /// Bytes read from a connection let read from the bucket's reserve.
    ReadFromReserve(f64),
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
    /// Who reads from a reserve first: how far its address and its networks below the level
    /// are from clean, on average, from 0 to 1.
    pub rank: f64,
}

/// What a bucket lets a connection do.
pub enum Admission {
    Read,
    FromReserve,
    /// Seconds to wait.
    Wait(f64),
}
