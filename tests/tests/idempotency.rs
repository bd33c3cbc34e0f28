//! One submission, one job: idempotency keys, concurrent submissions with one key, and job ids
//! whose short form is taken.

use reqwest::StatusCode;
use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{TestApp, HELLO};

async fn post_with_key(app: &TestApp, token: &str, key: &str, body: &Value) -> reqwest::Response {
    app.post_with_headers(token, "/compile", body, &[("Idempotency-Key", key)])
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_returns_the_original_job_or_a_conflict() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let first = post_with_key(&app, &app.token, "key-1", &body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    // The same body with its fields in another order is the same request.
    let reordered = json!({ "input_latex": HELLO, "project_id": app.project_id });
    let replay = post_with_key(&app, &app.token, "key-1", &reordered).await;
    assert_eq!(replay.status(), StatusCode::OK);
    assert_eq!(replay.json::<Value>().await.unwrap(), first);
    let other = json!({ "project_id": app.project_id, "input_latex": "\\relax" });
    let conflict = post_with_key(&app, &app.token, "key-1", &other).await;
    assert_eq!(conflict.status(), StatusCode::CONFLICT);
    let conflict: Value = conflict.json().await.unwrap();
    assert_eq!(conflict["code"], "idempotency_conflict", "{conflict:#}");
    assert!(
        conflict["detail"].as_str().unwrap().contains(first.id()),
        "the conflict names the original job: {conflict:#}"
    );
    let second = post_with_key(&app, &app.token, "key-2", &other).await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);
    let bad = post_with_key(&app, &app.token, "bad key", &body).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let bad: Value = bad.json().await.unwrap();
    assert_eq!(bad["code"], "validation_failed");
    assert_eq!(bad["errors"][0]["field"], "Idempotency-Key", "{bad:#}");
    assert_eq!(app.count_jobs("true").await, 2);

    // Keys belong to a project: another project's "key-1" is a job of its own.
    let (other_project, other_token) = app.other_project().await;
    let theirs = json!({ "project_id": other_project, "input_latex": HELLO });
    let theirs = post_with_key(&app, &other_token, "key-1", &theirs).await;
    assert_eq!(theirs.status(), StatusCode::ACCEPTED);
    assert_ne!(theirs.json::<Value>().await.unwrap()["id"], first["id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_submissions_with_one_key_make_one_job() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    let answers = futures::future::join_all(
        (0..16).map(|_| post_with_key(&app, &app.token, "one-key", &body)),
    )
    .await;
    let mut statuses = Vec::new();
    let mut ids = Vec::new();
    for answer in answers {
        statuses.push(answer.status().as_u16());
        ids.push(answer.json::<Value>().await.unwrap()["id"].clone());
    }
    statuses.sort();
    assert_eq!(statuses, [[200; 15].as_slice(), &[202]].concat());
    ids.dedup();
    assert_eq!(ids.len(), 1, "the answers name several jobs: {ids:?}");
    assert_eq!(app.count_jobs("true").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_id_is_drawn_when_the_short_id_is_taken() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let taken = app.submit(json!({ "input_latex": HELLO })).await;
    let taken_id = taken.id();
    // Another id with the same first segment, so the same storage keys.
    let colliding: uuid::Uuid = format!("{}-0000-4000-8000-000000000000", &taken_id[..8])
        .parse()
        .unwrap();
    let fresh = uuid::Uuid::new_v4();
    let api = texfleet_core::db::pool(&app.config, &app.config.api_database_url).unwrap();
    let mut client = api.get().await.unwrap();
    let transaction = texfleet_core::db::begin_project(&mut client, app.project_id)
        .await
        .unwrap();
    let job = texfleet_core::model::NewJob {
        project_id: app.project_id,
        engine: texfleet_core::model::Engine::Pdflatex,
        texlive: app.config.default_texlive.clone(),
        halt_on_error: false,
        draft: false,
        wordcount: false,
        check: None,
        thumbnail_width: None,
        timeout_seconds: 30,
        main: "main.tex".into(),
        files: vec![texfleet_core::model::SourceFile {
            path: "main.tex".into(),
            content: HELLO.into(),
        }],
        stored_files: Vec::new(),
        use_cache: false,
    };
    let submitted =
        texfleet_core::db::insert_job_with_ids(&transaction, &job, None, vec![colliding, fresh])
            .await
            .unwrap();
    transaction.commit().await.unwrap();
    let texfleet_core::db::Submitted::New(inserted) = submitted else {
        panic!("the job was not queued");
    };
    assert_eq!(inserted.id, fresh, "the colliding id was not drawn again");
    assert_eq!(
        app.get_json(&format!("/compile/{fresh}")).await["status"],
        "Queued"
    );
    assert_eq!(app.get_json(&format!("/compile/{taken_id}")).await, taken);
    assert_eq!(app.count_jobs(&format!("id = '{colliding}'")).await, 0);
}
