//! Answers while they are sent. An answer built in memory (a job, a page of jobs) stays there
//! until its client has taken the last byte, and a client may take one piece per
//! `idle_timeout_seconds`: the API holds at most `max_sending_bytes` of answers at once, and
//! one project at most a quarter of that, so that one project's slow readers leave room for
//! everyone else's; a project that holds nothing is always answered, so that projects filling
//! the whole budget together leave room for another.
//!
//! A request of a project past that is `503 unavailable` with `Retry-After` as soon as its
//! token is known, before anything is done (`SendingBudget::has_room`). A read (`GET`,
//! `HEAD`) whose answer would take the project past it is refused the same way; the answer to
//! a change (`POST`, `DELETE`) is sent anyway and counted, since the change is made. Streamed
//! answers (downloads) hold a piece at a time and are not counted.

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use uuid::Uuid;

/// The share of the budget one project may hold.
const PROJECT_SHARE: usize = 4;
/// The largest answer built in memory, a page of jobs (about 1.7 MB): a request starts only
/// while its project's share has room for it.
const LARGEST_ANSWER_KIB: usize = 2048;

/// The KiB of answers being sent, in all and per project (`None`: answers to no project, such
/// as `/healthz` and `401`s).
#[derive(Clone)]
pub struct SendingBudget {
    held: Arc<Mutex<Holding>>,
    total_kib: usize,
    per_project_kib: usize,
}

#[derive(Default)]
struct Holding {
    total: usize,
    projects: HashMap<Option<Uuid>, usize>,
}

/// The project a request was authenticated for, once it is known (set by the `Authenticated`
/// extractor, read when the answer is charged).
#[derive(Clone, Default)]
pub struct AnswerOwner(Arc<OnceLock<Uuid>>);

impl AnswerOwner {
    pub fn set(&self, project: Uuid) {
        let _ = self.0.set(project);
    }
}

/// An answer's place in the budget, carried in its response's extensions to the body that
/// sends it (`serve::Answering`), which lets go of it with the last frame.
#[derive(Clone)]
pub struct Charge {
    _held: Arc<Held>,
}

/// What one answer holds of the budget; dropping it gives it back.
struct Held {
    budget: SendingBudget,
    project: Option<Uuid>,
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

    /// Whether a request of `project` may start: the project holds nothing, or its share and
    /// the whole budget have room for the largest answer.
    pub fn has_room(&self, project: Uuid) -> bool {
        let held = self.held.lock().expect("not poisoned");
        let of_project = held.projects.get(&Some(project)).copied().unwrap_or(0);
        of_project == 0
            || (of_project + LARGEST_ANSWER_KIB <= self.per_project_kib
                && held.total + LARGEST_ANSWER_KIB <= self.total_kib)
    }

    /// `kib` for an answer to `project`; `None` when the answer `may_be_refused` and the
    /// project, holding something already, would pass its share or the whole budget.
    pub(crate) fn charge(
        &self,
        project: Option<Uuid>,
        kib: usize,
        may_be_refused: bool,
    ) -> Option<Charge> {
        let mut held = self.held.lock().expect("not poisoned");
        let of_project = held.projects.get(&project).copied().unwrap_or(0);
        let over = of_project > 0
            && (of_project + kib > self.per_project_kib || held.total + kib > self.total_kib);
        if over && may_be_refused {
            return None;
        }
        held.total += kib;
        *held.projects.entry(project).or_insert(0) += kib;
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
        if let Some(of_project) = held.projects.get_mut(&self.project) {
            *of_project -= self.kib;
            if *of_project == 0 {
                held.projects.remove(&self.project);
            }
        }
    }
}

/// Charges every answer built in memory to its project until its last byte is taken.
pub async fn charge_answers(
    State(budget): State<SendingBudget>,
    mut request: Request,
    next: Next,
) -> Response {
    let owner = AnswerOwner::default();
    request.extensions_mut().insert(owner.clone());
    let may_be_refused = matches!(*request.method(), Method::GET | Method::HEAD);
    let response = next.run(request).await;
    let Some(bytes) = hyper::body::Body::size_hint(response.body()).exact() else {
        return response;
    };
    let kib = (bytes as usize).div_ceil(1024).max(1);
    match budget.charge(owner.0.get().copied(), kib, may_be_refused) {
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
        let (one, other) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
        let first = budget.charge(one, 2048, true).expect("within the share");
        assert!(budget.has_room(one.unwrap()), "room for the largest answer");
        let second = budget.charge(one, 2047, true).expect("within the share");
        assert!(
            !budget.has_room(one.unwrap()),
            "no room for the largest answer"
        );
        assert!(
            budget.charge(one, 2, true).is_none(),
            "a read past the share"
        );
        let change = budget.charge(one, 2, false).expect("a change is answered");
        let others = budget
            .charge(other, 4096, true)
            .expect("another project's share");
        drop((first, second, change, others));
        assert_eq!(budget.held_kib(), 0);
        assert!(budget.held.lock().unwrap().projects.is_empty());
    }

    #[test]
    fn a_full_budget_refuses_projects_that_hold_some_and_answers_one_that_holds_none() {
        let budget = SendingBudget::new(8 * 1024);
        let projects: Vec<Option<Uuid>> = (0..4).map(|_| Some(Uuid::new_v4())).collect();
        let held: Vec<Charge> = projects
            .iter()
            .map(|&project| budget.charge(project, 1, true).unwrap())
            .chain(
                projects
                    .iter()
                    .map(|&project| budget.charge(project, 1, true).unwrap()),
            )
            .collect();
        assert!(
            budget.charge(projects[0], 1, true).is_none(),
            "the budget is full"
        );
        assert!(!budget.has_room(projects[0].unwrap()));
        let newcomer = Some(Uuid::new_v4());
        let first = budget
            .charge(newcomer, 1, true)
            .expect("a project holding none");
        assert!(budget.charge(newcomer, 1, true).is_none());
        drop((held, first));
        assert!(budget.charge(projects[0], 2, true).is_some());
    }
}
