//! What the tests read of the objects the API answers with (a job, a webhook endpoint), without
//! `["id"].as_str().unwrap()` at each use.

use serde_json::Value;

pub trait ApiObject {
    /// The object's `id`; panics, showing the object, when it has none (an error's body).
    fn id(&self) -> &str;
}

impl ApiObject for Value {
    fn id(&self) -> &str {
        self["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {self:#}"))
    }
}
