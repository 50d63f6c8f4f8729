//! Hooks against flags served by the local flag server, on every runtime feature: the
//! evaluation stages see the real result and the environment id the server reports
//! (`X-LD-EnvID`), and `track` runs the track stage.
#![cfg(all(feature = "server", feature = "eval"))]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
#[allow(unused_imports)] // this binary uses the flag server, not the scripted one
mod common;

use std::sync::{Arc, Mutex};

use common::*;
use flagsync::eval::{ContextBuilder, Reason};
use flagsync::hooks::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
    TrackSeriesContext,
};
use flagsync::server as flag_server;
use serde_json::json;

runtime_tests!(hooks_see_the_result_and_the_environment_id);

/// Everything the hook saw, one line per stage.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Hook for Seen {
    fn metadata(&self) -> Metadata {
        Metadata::new("seen")
    }

    fn before_evaluation(
        &self,
        s: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
    ) -> Result<EvaluationSeriesData, HookError> {
        Ok(data.with("env-before", s.environment_id().map(str::to_owned)))
    }

    fn after_evaluation(
        &self,
        s: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        let before = data.get::<Option<String>>("env-before").cloned().flatten();
        self.0.lock().unwrap().push(format!(
            "{} {} {:?} {:?} {:?} {:?} {:?}",
            s.flag_key,
            s.method,
            s.environment_id(),
            before,
            Some(detail.value()),
            detail.variation_index(),
            detail.reason()
        ));
        Ok(data)
    }

    fn after_track(&self, s: &TrackSeriesContext<'_>) -> Result<(), HookError> {
        self.0.lock().unwrap().push(format!(
            "track {} {:?} {:?}",
            s.key,
            s.environment_id(),
            s.metric_value
        ));
        Ok(())
    }
}

async fn hooks_see_the_result_and_the_environment_id(rt: Rt) {
    let server = flag_server::Server::builder()
        .data(
            json!({"flags": {"f": {"key": "f", "version": 1, "on": true, "salt": "s",
            "variations": [false, true], "fallthrough": {"variation": 0}, "offVariation": 0,
            "targets": [{"values": ["alice"], "variation": 1}], "rules": [],
            "prerequisites": []}}}),
        )
        .env_id(Some("env-7".into()))
        .start()
        .unwrap();
    let seen = Arc::new(Seen::default());
    let client = builder(&rt, &server.url())
        .hooks([seen.clone() as Arc<dyn Hook>])
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(
        client
            .wait_for_initialization(std::time::Duration::from_secs(5))
            .await
    );
    let alice = ContextBuilder::new("alice").build().unwrap();
    assert!(client.bool_variation("f", &alice, false));
    client.track("bought", &alice, None, Some(3.0));
    let env = Some("env-7".to_owned());
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            format!(
                "f BoolVariation {env:?} {env:?} Some(Bool(true)) Some(1) {:?}",
                Reason::target_match()
            ),
            format!("track bought {env:?} Some(3.0)"),
        ]
    );
    client.close().await;
}
