//! Projects and API tokens: created by the operator's commands (as the owner role), and
//! checked on every request through `authenticate()`, which the API role may call but whose
//! table it may not read (migration V4).

use super::DbResult;
use time::OffsetDateTime;
use tokio_postgres::GenericClient;
use uuid::Uuid;

pub async fn create_project(client: &impl GenericClient, name: &str) -> DbResult<Uuid> {
    let id = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO projects (id, name) VALUES ($1, $2)",
            &[&id, &name],
        )
        .await?;
    Ok(id)
}

pub async fn project_exists(client: &impl GenericClient, id: Uuid) -> DbResult<bool> {
    Ok(client
        .query_opt("SELECT 1 FROM projects WHERE id = $1", &[&id])
        .await?
        .is_some())
}

pub async fn create_token(
    client: &impl GenericClient,
    project_id: Uuid,
    name: &str,
    token_hash: &[u8],
    expires_at: Option<OffsetDateTime>,
) -> DbResult<Uuid> {
    let id = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO api_tokens (id, project_id, name, token_hash, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
            &[&id, &project_id, &name, &token_hash, &expires_at],
        )
        .await?;
    Ok(id)
}

/// The token's project, if the hash names a live token. The SQL function (migration V4) runs
/// as the owner, so the API role never reads the tokens table; it refreshes `last_used_at` at
/// most once a minute so that authentication does not turn every request into a write.
pub async fn authenticate(
    client: &deadpool_postgres::Client,
    token_hash: &[u8],
) -> DbResult<Option<Uuid>> {
    let statement = client.prepare_cached("SELECT authenticate($1)").await?;
    let row = client.query_one(&statement, &[&token_hash]).await?;
    Ok(row.get(0))
}

/// The hashes of the live tokens created since `since`, each with its creation time (migration
/// V19): the API keeps them to refuse made-up tokens without a lookup.
pub async fn live_token_hashes(
    client: &deadpool_postgres::Client,
    since: OffsetDateTime,
) -> DbResult<Vec<(Vec<u8>, OffsetDateTime)>> {
    let rows = client
        .query("SELECT * FROM live_token_hashes($1)", &[&since])
        .await?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

pub struct TokenInfo {
    pub id: Uuid,
    pub name: String,
    pub created_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub last_used_at: Option<OffsetDateTime>,
}

pub async fn list_tokens(
    client: &impl GenericClient,
    project_id: Uuid,
) -> DbResult<Vec<TokenInfo>> {
    let rows = client
        .query(
            "SELECT id, name, created_at, expires_at, revoked_at, last_used_at
             FROM api_tokens WHERE project_id = $1 ORDER BY created_at",
            &[&project_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| TokenInfo {
            id: row.get(0),
            name: row.get(1),
            created_at: row.get(2),
            expires_at: row.get(3),
            revoked_at: row.get(4),
            last_used_at: row.get(5),
        })
        .collect())
}

/// Revokes a token; false when no live token has that id.
pub async fn revoke_token(client: &impl GenericClient, token_id: Uuid) -> DbResult<bool> {
    let revoked = client
        .execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
            &[&token_id],
        )
        .await?;
    Ok(revoked == 1)
}
