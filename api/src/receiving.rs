//! Request bodies while they arrive. Each is kept whole until its last byte, so slow uploads
//! near `max_body_bytes` could hold the host's memory: the API holds at most
//! [`BUDGET_BODIES`] of the largest at once, and one project at most a quarter of that, so that
//! one project's stalled uploads leave room for everyone else's. A project holding less than
//! one body of the largest size is refused only by its own share, so that projects filling the
//! budget together leave room for another's upload.

use axum::body::{Body, Bytes};
use http_body_util::BodyExt;
use hyper::body::Body as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

/// The most of an oversized body that is read (and dropped) before the `413`, so that a
/// client that writes its whole body before it reads gets the answer, not a broken pipe.
const MAX_DRAINED_BYTES: usize = 256 * 1024 * 1024;
/// Bodies of `max_body_bytes` the API may hold while they arrive.
const BUDGET_BODIES: usize = 16;
/// What a body costs in memory, in bodies: its bytes and what is parsed from them, then the
/// job made of it, the insert's message and the connection's write buffer (each step
/// consumes what the one before made; 16 bodies of 19 MiB measured 2.9 times their size).
const COPIES: usize = 3;
/// The share of the budget one project may hold.
const PROJECT_SHARE: usize = 4;

/// Why a request body could not be had.
#[derive(Debug)]
pub enum BodyError {
    /// Larger than the limit (read to its end, up to a bound, so the client hears why).
    TooLarge,
    /// Not received within the body timeout.
    TimedOut,
    /// The connection broke while it was sent.
    Broken,
    /// The API, or this project, holds its share of bodies being received already.
    Busy,
}

/// The KiB of bodies being received, in all and per project.
#[derive(Clone)]
pub struct ReceivingBudget {
    total: Arc<Semaphore>,
    per_project_kib: usize,
    /// One body of the largest size: what a project may hold past a spent budget.
    floor_kib: usize,
    projects: Arc<Mutex<HashMap<Uuid, usize>>>,
}

/// What one body holds of the budget; dropping it gives it back.
pub struct Held {
    permit: Option<OwnedSemaphorePermit>,
    /// KiB held beyond the spent budget, under the floor.
    beyond: usize,
    project: Uuid,
    projects: Arc<Mutex<HashMap<Uuid, usize>>>,
}

impl ReceivingBudget {
    /// A budget of [`BUDGET_BODIES`] bodies of `max_body_bytes`, whose project share holds at
    /// least a buffer of `part_bytes` (a part of a project file's upload), whatever the largest
    /// body.
    pub fn new(max_body_bytes: usize, part_bytes: usize) -> ReceivingBudget {
        let body_kib = (COPIES * max_body_bytes).div_ceil(1024);
        let part_kib = part_bytes.div_ceil(1024);
        let kib = (BUDGET_BODIES * body_kib)
            .max(PROJECT_SHARE * part_kib)
            .min(Semaphore::MAX_PERMITS);
        ReceivingBudget {
            total: Arc::new(Semaphore::new(kib)),
            per_project_kib: kib / PROJECT_SHARE,
            floor_kib: body_kib,
            projects: Arc::default(),
        }
    }

    fn hold(&self, project: Uuid) -> Held {
        Held {
            permit: None,
            beyond: 0,
            project,
            projects: self.projects.clone(),
        }
    }

    /// `kib` more for `held`, if its project's share is not spent, nor the whole budget while
    /// the project holds a body's worth already.
    fn grow(&self, held: &mut Held, kib: usize) -> Result<(), BodyError> {
        let mut projects = self.projects.lock().expect("not poisoned");
        let project = projects.entry(held.project).or_insert(0);
        if *project + kib > self.per_project_kib {
            return Err(BodyError::Busy);
        }
        match self.total.clone().try_acquire_many_owned(kib as u32) {
            Ok(more) => match &mut held.permit {
                Some(permit) => permit.merge(more),
                None => held.permit = Some(more),
            },
            Err(_) if *project + kib <= self.floor_kib => held.beyond += kib,
            Err(_) => return Err(BodyError::Busy),
        }
        *project += kib;
        Ok(())
    }
}

impl Held {
    fn kib(&self) -> usize {
        self.beyond
            + self
                .permit
                .as_ref()
                .map_or(0, |permit| permit.num_permits())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let kib = self.kib();
        let mut projects = self.projects.lock().expect("not poisoned");
        if let Some(project) = projects.get_mut(&self.project) {
            *project -= kib;
            if *project == 0 {
                projects.remove(&self.project);
            }
        }
    }
}

/// A place of `bytes` in the budget, as `project`'s, for a body read a part at a time into a
/// buffer of that size (one copy: nothing is parsed from it).
pub fn hold_bytes(
    budget: &ReceivingBudget,
    project: Uuid,
    bytes: usize,
) -> Result<Held, BodyError> {
    let mut held = budget.hold(project);
    budget.grow(&mut held, bytes.div_ceil(1024))?;
    Ok(held)
}

/// The whole body, if it is at most `limit` bytes and arrives within `timeout`, and its place
/// in the budget, as `project`'s: the caller keeps that for as long as it holds what it makes
/// of the body.
pub async fn read_body(
    body: Body,
    limit: usize,
    timeout: Duration,
    budget: &ReceivingBudget,
    project: Uuid,
) -> Result<(Bytes, Held), BodyError> {
    let budget = budget.clone();
    let read = async move {
        let mut body = body;
        // With a declared length the buffer is the body's size; without, it doubles as it
        // grows, and what it takes is what the budget counts.
        let declared = (body.size_hint().exact().unwrap_or(0) as usize).min(limit);
        let mut held = budget.hold(project);
        budget.grow(&mut held, cost_kib(declared))?;
        let mut collected = Vec::with_capacity(declared);
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyError::Broken)?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            seen += data.len();
            if seen <= limit {
                collected.extend_from_slice(&data);
                // The body's cost, taken as it grows.
                let wanted = cost_kib(collected.capacity());
                if wanted > held.kib() {
                    let more = wanted - held.kib();
                    budget.grow(&mut held, more)?;
                }
            } else if seen > MAX_DRAINED_BYTES {
                return Err(BodyError::TooLarge);
            }
        }
        if seen > limit {
            return Err(BodyError::TooLarge);
        }
        Ok((Bytes::from(collected), held))
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(BodyError::TimedOut))
}

/// What a body buffer of `bytes` costs the budget, in KiB.
fn cost_kib(bytes: usize) -> usize {
    (COPIES * bytes).div_ceil(1024)
}

/// Runs `work` on a thread of the blocking pool, holding the body's `place` in the receiving
/// budget until it ends: a client that goes away drops the request, not the work, which goes
/// on with the body in memory and so must stay counted.
pub async fn off_the_workers<T: Send + 'static>(
    place: &Arc<Held>,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let place = Arc::clone(place);
    tokio::task::spawn_blocking(move || {
        let made = work();
        drop(place);
        made
    })
    .await
    .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(bytes: usize) -> Body {
        Body::from(vec![b'x'; bytes])
    }

    #[tokio::test]
    async fn one_project_holds_a_quarter_of_the_budget_and_gives_it_back() {
        let budget = ReceivingBudget::new(1024 * 1024, 0);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let mut held = Vec::new();
        for _ in 0..4 {
            let mut body = budget.hold(one);
            budget.grow(&mut body, COPIES * 1024).unwrap();
            held.push(body);
        }
        let mut fifth = budget.hold(one);
        assert!(matches!(budget.grow(&mut fifth, 1), Err(BodyError::Busy)));
        let mut others = budget.hold(other);
        budget.grow(&mut others, 1024).unwrap();
        drop((held, fifth, others));
        assert!(budget.projects.lock().unwrap().is_empty());
        assert_eq!(budget.total.available_permits(), 16 * COPIES * 1024);
    }

    #[test]
    fn projects_filling_the_budget_leave_one_body_to_a_project_holding_less() {
        let budget = ReceivingBudget::new(1024 * 1024, 0);
        let full: Vec<Held> = (0..4)
            .map(|_| {
                let mut held = budget.hold(Uuid::new_v4());
                budget.grow(&mut held, 4 * COPIES * 1024).unwrap();
                held
            })
            .collect();
        assert_eq!(budget.total.available_permits(), 0);
        let mut light = budget.hold(Uuid::new_v4());
        budget
            .grow(&mut light, COPIES * 1024)
            .expect("one body past the spent budget");
        assert!(matches!(budget.grow(&mut light, 1), Err(BodyError::Busy)));
        drop((full, light));
        assert!(budget.projects.lock().unwrap().is_empty());
        assert_eq!(budget.total.available_permits(), 16 * COPIES * 1024);
    }

    #[test]
    fn a_project_s_share_holds_an_upload_s_part_however_small_the_largest_body() {
        let part = 8 * 1024 * 1024;
        let budget = ReceivingBudget::new(4096, part);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let first = hold_bytes(&budget, one, part).expect("a part fits a project's share");
        assert!(matches!(
            hold_bytes(&budget, one, part),
            Err(BodyError::Busy)
        ));
        let second = hold_bytes(&budget, other, part).expect("another project's part fits");
        drop((first, second));
        assert!(budget.projects.lock().unwrap().is_empty());
    }

    /// A body that declares its length and never sends a byte.
    struct Declared(u64);

    impl hyper::body::Body for Declared {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            std::task::Poll::Pending
        }

        fn size_hint(&self) -> hyper::body::SizeHint {
            hyper::body::SizeHint::with_exact(self.0)
        }
    }

    #[tokio::test]
    async fn a_declared_length_is_charged_before_a_byte_arrives_and_until_the_caller_lets_go() {
        let budget = ReceivingBudget::new(4096, 0);
        let project = Uuid::new_v4();
        let declared = Body::new(Declared(4096 * 4 + 1));
        let refused = read_body(declared, 1 << 20, Duration::from_secs(5), &budget, project);
        assert!(matches!(refused.await, Err(BodyError::Busy)));
        let (_, place) = read_body(
            body_of(4096),
            4096,
            Duration::from_secs(5),
            &budget,
            project,
        )
        .await
        .unwrap();
        assert_eq!(budget.total.available_permits(), (64 - 4) * COPIES);
        drop(place);
        assert_eq!(budget.total.available_permits(), 64 * COPIES);
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole_and_holds_nothing_after() {
        let budget = ReceivingBudget::new(4096, 0);
        let project = Uuid::new_v4();
        let read = read_body(
            body_of(4096),
            4096,
            Duration::from_secs(5),
            &budget,
            project,
        );
        assert_eq!(read.await.unwrap().0.len(), 4096);
        let over = read_body(
            body_of(4097),
            4096,
            Duration::from_secs(5),
            &budget,
            project,
        );
        assert!(matches!(over.await, Err(BodyError::TooLarge)));
        // A quarter of sixteen bodies is four: a fifth body's worth is refused.
        let busy = read_body(
            body_of(4096 * 4 + 1),
            1 << 20,
            Duration::from_secs(5),
            &budget,
            project,
        );
        assert!(matches!(busy.await, Err(BodyError::Busy)));
        assert!(budget.projects.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn work_on_a_body_holds_its_place_after_its_client_went_away() {
        let budget = ReceivingBudget::new(4096, 0);
        let project = Uuid::new_v4();
        let (_, place) = read_body(
            body_of(4096),
            4096,
            Duration::from_secs(5),
            &budget,
            project,
        )
        .await
        .unwrap();
        let place = Arc::new(place);
        let (started, has_started) = tokio::sync::oneshot::channel();
        let (finish, may_finish) = std::sync::mpsc::channel::<()>();
        let request = tokio::spawn(async move {
            off_the_workers(&place, move || {
                started.send(()).unwrap();
                may_finish.recv().unwrap();
            })
            .await
        });
        has_started.await.unwrap();
        // The client goes away: its request is dropped while the parse goes on.
        request.abort();
        assert!(request.await.unwrap_err().is_cancelled());
        assert_eq!(budget.total.available_permits(), (64 - 4) * COPIES);
        finish.send(()).unwrap();
        let given_back = async {
            while budget.total.available_permits() != 64 * COPIES {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), given_back)
            .await
            .expect("the place is given back once the work ends");
        assert!(budget.projects.lock().unwrap().is_empty());
    }
}
