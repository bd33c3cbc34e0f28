//! An error answer of the API, as a client command reports it: the status and the problem the
//! server explained (`application/problem+json`), with the wrong fields of a `422`.

#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub detail: String,
    /// The wrong fields of a `422`: (field, message).
    pub fields: Vec<(String, String)>,
    /// The project files a submission named that the project does not hold.
    pub missing_sha256: Vec<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server answered {}", self.status)?;
        if !self.code.is_empty() {
            write!(f, " {}", self.code)?;
        }
        if !self.detail.is_empty() && self.fields.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        for (field, message) in &self.fields {
            write!(f, "\n  {field}: {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}
