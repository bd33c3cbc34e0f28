//! Places a project may hold at once (the API's waits and downloads in flight, webhook host
//! lookups), so that one project's requests cannot take what every project shares:
//! connections, the object store's, blocking threads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

#[derive(Clone)]
pub struct ProjectSlots {
    per_project: usize,
    held: Arc<Mutex<HashMap<Uuid, usize>>>,
}

/// A project's place; dropping it frees the place.
pub struct ProjectSlot {
    project: Uuid,
    held: Arc<Mutex<HashMap<Uuid, usize>>>,
}

impl ProjectSlots {
    pub fn new(per_project: usize) -> ProjectSlots {
        ProjectSlots {
            per_project,
            held: Arc::default(),
        }
    }

    /// A place for `project`, unless it holds `per_project` already.
    pub fn take(&self, project: Uuid) -> Option<ProjectSlot> {
        let mut held = self.held.lock().expect("not poisoned");
        let count = held.entry(project).or_insert(0);
        if *count >= self.per_project {
            return None;
        }
        *count += 1;
        Some(ProjectSlot {
            project,
            held: self.held.clone(),
        })
    }
}

impl Drop for ProjectSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().expect("not poisoned");
        if let Some(count) = held.get_mut(&self.project) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.project);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_holds_at_most_its_places_and_gets_them_back() {
        let slots = ProjectSlots::new(2);
        let (one, other) = (Uuid::new_v4(), Uuid::new_v4());
        let held: Vec<ProjectSlot> = (0..2).map(|_| slots.take(one).unwrap()).collect();
        assert!(slots.take(one).is_none());
        assert!(slots.take(other).is_some());
        drop(held);
        assert!(slots.take(one).is_some());
        assert!(slots.held.lock().unwrap().is_empty());
    }
}
