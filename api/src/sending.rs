//! Answers while they are sent. An answer built in memory (a job, a page of jobs) stays there
//! until its client has taken the last byte, and a client may take one piece per
//! `idle_timeout_seconds`: the API holds at most `max_sending_bytes` of answers at once, and
//! one project at most a quarter of that, so that one project's slow readers leave room for
//! everyone else's; a project that holds little ([`FLOOR_KIB`]) is refused only by its own
//! share, so that projects filling the whole budget together leave room for another.
//!
//! A request takes [`RESERVED_KIB`] of its project's share as soon as its token is known,
//! before anything is done, or is `503 unavailable` with `Retry-After`
//! (`SendingBudget::reserve`); that place becomes its answer's when it is built. A read
//! (`GET`, `HEAD`) whose answer would take the project past its share is refused the same
//! way; the answer to a change (`POST`, `DELETE`), made by then, is sent and counted. An
//! answer holds its place until hyper has taken its last piece (`serve::Answering`), and hyper
//! buffers little (`serve::HTTP1_BUFFER`). Streamed answers (downloads) hold a piece at a time,
//! and answers to no project (health, `401`s, the OpenAPI document's shared bytes) are small
//! or shared: neither is counted.

use crate::metrics;
use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// The share of the budget one project may hold.
const PROJECT_SHARE: usize = 4;
/// What a project may always hold, however full the whole budget is (only its own share
/// bounds it): a page of jobs and a request's place. Projects filling the budget together
/// thus never shut out one that holds little.
const FLOOR_KIB: usize = 2048 + RESERVED_KIB;
/// What a request holds of its project's share from its authentication to its answer: the
/// largest answer to a change (a job with its diagnostics, which a compile keeps to about
/// 150 kB). A page of jobs, a read, is charged as it is.
const RESERVED_KIB: usize = 256;

/// The KiB of answers being sent, in all and per project.
#[derive(Clone)]
pub struct SendingBudget {
    held: Arc<Mutex<Holding>>,
    total_kib: usize,
    per_project_kib: usize,
}

#[derive(Default)]
struct Holding {
    total: usize,
    projects: HashMap<Uuid, usize>,
}

/// The project a request was authenticated for and the place it reserved (set by the
/// `Authenticated` extractor, taken when the answer is charged).
#[derive(Clone, Default)]
pub struct AnswerOwner(Arc<Mutex<Option<(Uuid, Charge)>>>);

impl AnswerOwner {
    pub fn set(&self, project: Uuid, reserved: Charge) {
        *self.0.lock().expect("not poisoned") = Some((project, reserved));
    }
}

/// A place in the budget: an answer's, carried in its response's extensions to the body that
/// sends it (`serve::Answering`), which lets go of it with the last piece; or a request's.
#[derive(Clone)]
pub struct Charge {
    _held: Arc<Held>,
}

/// What one answer holds of the budget; dropping it gives it back.
struct Held {
    budget: SendingBudget,
    project: Uuid,
    kib: usize,
}

impl SendingBudget {
    pub fn new(max_sending_bytes: usize) -> SendingBudget {
        let total_kib = max_sending_bytes.div_ceil(1024);
        SendingBudget {
            held: Arc::default(),
            total_kib,
            per_project_kib: total_kib / PROJECT_SHARE,
        }
    }

    /// A request's place for `project`, unless the project holds its share or the budget is
    /// spent (a project that holds nothing always has one).
    pub fn reserve(&self, project: Uuid) -> Option<Charge> {
        self.charge(project, RESERVED_KIB, true)
    }

    /// `kib` for an answer to `project`; `None` when the answer `may_be_refused` and the
    /// project, holding something already, would pass its share, or pass [`FLOOR_KIB`] while
    /// the whole budget is spent.
    pub(crate) fn charge(&self, project: Uuid, kib: usize, may_be_refused: bool) -> Option<Charge> {
        let mut held = self.held.lock().expect("not poisoned");
        let of_project = held.projects.get(&project).copied().unwrap_or(0);
        let past_share = of_project + kib > self.per_project_kib;
        let budget_spent = held.total + kib > self.total_kib && of_project + kib > FLOOR_KIB;
        let over = of_project > 0 && (past_share || budget_spent);
        if over && may_be_refused {
            return None;
        }
        held.total += kib;
        *held.projects.entry(project).or_insert(0) += kib;
        metrics::set_answer_bytes_held(held.total);
        Some(Charge {
            _held: Arc::new(Held {
                budget: self.clone(),
                project,
                kib,
            }),
        })
    }

    /// The KiB held in all.
    #[cfg(test)]
    pub(crate) fn held_kib(&self) -> usize {
        self.held.lock().expect("not poisoned").total
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().expect("not poisoned");
        held.total -= self.kib;
        metrics::set_answer_bytes_held(held.total);
        if let Some(of_project) = held.projects.get_mut(&self.project) {
            *of_project -= self.kib;
            if *of_project == 0 {
                held.projects.remove(&self.project);
            }
        }
    }
}

/// Charges every answer to a project built in memory until its last piece is taken.
pub async fn charge_answers(
    State(budget): State<SendingBudget>,
    mut request: Request,
    next: Next,
) -> Response {
    let owner = AnswerOwner::default();
    request.extensions_mut().insert(owner.clone());
    let may_be_refused = matches!(*request.method(), Method::GET | Method::HEAD);
    let response = next.run(request).await;
    let reserved = owner.0.lock().expect("not poisoned").take();
    let Some((project, reserved)) = reserved else {
        return response;
    };
    let Some(bytes) = hyper::body::Body::size_hint(response.body()).exact() else {
        return response;
    };
    // The request's place gives way to its answer's.
    drop(reserved);
    let kib = (bytes as usize).div_ceil(1024).max(1);
    match budget.charge(project, kib, may_be_refused) {
        Some(charge) => {
            let mut response = response;
            response.extensions_mut().insert(charge);
            response
        }
        None => Problem::answers_held().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_holds_a_quarter_and_a_change_is_answered_beyond_it() {
        let budget = SendingBudget::new(16 * 1024 * 1024);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let first = budget.charge(one, 3840, true).expect("within the share");
        assert!(budget.reserve(one).is_some(), "room for a request");
        let second = budget.charge(one, 1, true).expect("within the share");
        assert!(budget.reserve(one).is_none(), "no room for a request");
        assert!(
            budget.charge(one, 256, true).is_none(),
            "a read past the share"
        );
        let change = budget
            .charge(one, 256, false)
            .expect("a change is answered");
        let others = budget
            .charge(other, 4096, true)
            .expect("another project's share");
        drop((first, second, change, others));
        assert_eq!(budget.held_kib(), 0);
        assert!(budget.held.lock().unwrap().projects.is_empty());
    }

    #[test]
    fn a_full_budget_refuses_projects_past_the_floor_and_answers_one_below_it() {
        let budget = SendingBudget::new(64 * 1024 * 1024);
        let projects: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
        let held: Vec<Charge> = projects
            .iter()
            .map(|&project| budget.charge(project, 16 * 1024, true).unwrap())
            .collect();
        assert!(
            budget.charge(projects[0], 1, true).is_none(),
            "the share is spent"
        );
        let newcomer = Uuid::new_v4();
        let first = budget.reserve(newcomer).expect("a project holding none");
        let second = budget.reserve(newcomer).expect("below the floor");
        let page = budget
            .charge(newcomer, 1024, true)
            .expect("below the floor");
        assert!(
            budget.charge(newcomer, 1024, true).is_none(),
            "past the floor while the budget is spent"
        );
        drop((held, first, second, page));
        assert_eq!(budget.held_kib(), 0);
    }
}
