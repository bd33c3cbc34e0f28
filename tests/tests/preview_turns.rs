//! The turns of page previews among projects, as the scheduler's claim takes them: the
//! project that used the least render time first, one render of a project at a time, and a
//! slot that projects whose renders are heavy leave to the others.

use texfleet_e2e::TestApp;

/// A Succeeded job of `project` with a stored PDF named `key`, written as the owner.
async fn succeeded_job(app: &TestApp, project: uuid::Uuid, key: &str) -> uuid::Uuid {
    let id = uuid::Uuid::new_v4();
    app.execute(&format!(
        "INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts,
                           status, finished_at, pdf_storage_key)
         VALUES ('{id}', '{project}', 'pdflatex', '2024', 30, 1, 'Succeeded', now(), '{key}')"
    ))
    .await;
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_take_turns_the_one_that_rendered_least_first() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (other, _) = app.other_project().await;
    let (busy, quiet) = (app.project_id, other);
    let busy_job = succeeded_job(&app, busy, "a.pdf").await;
    let quiet_job = succeeded_job(&app, quiet, "b.pdf").await;
    // The busy project had a page rendered a moment ago, in a second, and queued three more
    // before the quiet project queued its first.
    for rows in [
        format!(
            "INSERT INTO page_previews (job_id, project_id, page, width, status, started_at,
                                        finished_at, last_render_seconds, last_render_at)
             VALUES ('{busy_job}', '{busy}', 1, 100, 'Succeeded', now() - interval '1 second',
                     now(), 1, now())"
        ),
        format!(
            "INSERT INTO page_previews (job_id, project_id, page, width, created_at)
             SELECT '{busy_job}', '{busy}', page, 100, now() - interval '1 minute'
             FROM generate_series(2, 4) AS page"
        ),
        format!(
            "INSERT INTO page_previews (job_id, project_id, page, width)
             VALUES ('{quiet_job}', '{quiet}', 1, 100)"
        ),
    ] {
        app.execute(&rows).await;
    }
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let claimed = texfleet_core::db::claim_previews(&scheduler, "test", 30, (1, 0), 1)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].project_id, quiet, "the quiet project's turn");
    let next = texfleet_core::db::claim_previews(&scheduler, "test", 30, (2, 0), 1)
        .await
        .unwrap();
    assert_eq!(next.len(), 1, "one render of a project at a time: {next:?}");
    assert_eq!((next[0].project_id, next[0].page), (busy, 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_whose_renders_are_heavy_leave_a_slot_to_the_others() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (b, _) = app.other_project().await;
    let (light, _) = app.other_project().await;
    let scheduler =
        texfleet_core::db::pool(&app.config, &app.config.scheduler_database_url).unwrap();
    let claim = |free: usize| {
        let scheduler = scheduler.clone();
        async move {
            let claimed = texfleet_core::db::claim_previews(&scheduler, "test", 30, (free, 1), 1);
            claimed.await.unwrap()
        }
    };
    // Two projects each had a render that took 10 s or more (a PDF built to be slow): one
    // failed and was asked for again (queued, its time still counted), the other queued another.
    let a_job = succeeded_job(&app, app.project_id, "a.pdf").await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width, last_render_seconds,
                                    last_render_at)
         VALUES ('{a_job}', '{}', 1, 100, 11, now())",
        app.project_id
    ))
    .await;
    let b_job = succeeded_job(&app, b, "a.pdf").await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width, status, last_render_seconds,
                                    last_render_at)
         VALUES ('{b_job}', '{b}', 1, 100, 'Failed', 10, now())"
    ))
    .await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width)
         VALUES ('{b_job}', '{b}', 2, 100)"
    ))
    .await;
    assert!(
        claim(1).await.is_empty(),
        "the last free slot is not theirs"
    );
    // An editor that had fifty pages rendered, half a second each, is light all the same.
    let light_job = succeeded_job(&app, light, "b.pdf").await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width, status, last_render_seconds,
                                    last_render_at)
         SELECT '{light_job}', '{light}', page, 100, 'Succeeded', 0.5, now()
         FROM generate_series(2, 51) AS page"
    ))
    .await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width)
         VALUES ('{light_job}', '{light}', 1, 100)"
    ))
    .await;
    let claimed = claim(1).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].project_id, light, "a light project takes it");
    let claimed = claim(2).await;
    assert_eq!(
        claimed.len(),
        1,
        "one of two free slots for the heavy: {claimed:?}"
    );
    assert_eq!(
        claimed[0].project_id, b,
        "the one that used less render time"
    );
}
