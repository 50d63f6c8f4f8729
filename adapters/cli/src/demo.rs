//! `flagsync demo`: an embedded server with sample data, the script of changes it
//! makes, and a client watching them.

use std::sync::Arc;
use std::time::Duration;

use flagsync_server::Server;
use serde_json::{Value, json};

use crate::client::{Options, Session};

use crate::args::{DemoArgs, seconds};
use crate::error::CliError;
use crate::printer::plural;
use crate::printer::{Printer, print_updates};
use crate::serve::counts;

/// Five flags and two segments in the shape LaunchDarkly serves.
pub fn sample_data() -> Value {
    json!({
        "flags": {
            "new-checkout-flow": {
                "key": "new-checkout-flow", "version": 1, "on": true,
                "variations": [false, true],
                "fallthrough": {"rollout": {"variations": [
                    {"variation": 0, "weight": 80000}, {"variation": 1, "weight": 20000}]}},
                "offVariation": 0,
                "targets": [{"variation": 1, "values": ["alice", "bob"]}],
                "rules": [{
                    "id": "beta-users", "variation": 1, "trackEvents": false,
                    "clauses": [{"attribute": "segmentMatch", "op": "segmentMatch",
                                 "values": ["beta-testers"], "negate": false}]
                }],
                "prerequisites": [],
                "salt": "d9a7c5f3b1e24f6a", "trackEvents": false, "clientSide": false
            },
            "search-ranking": {
                "key": "search-ranking", "version": 4, "on": true,
                "variations": ["classic", "semantic-v1", "semantic-v2"],
                "fallthrough": {"variation": 0},
                "offVariation": 0,
                "targets": [],
                "rules": [{
                    "id": "internal", "variation": 2,
                    "clauses": [{"attribute": "email", "op": "endsWith",
                                 "values": ["@example.com"], "negate": false}]
                }],
                "prerequisites": [],
                "salt": "0c6d1b9e8f7a4c3d"
            },
            "max-upload-mb": {
                "key": "max-upload-mb", "version": 2, "on": true,
                "variations": [10, 50, 200],
                "fallthrough": {"variation": 1},
                "offVariation": 0,
                "targets": [],
                "rules": [{
                    "id": "enterprise", "variation": 2,
                    "clauses": [{"attribute": "plan", "op": "in",
                                 "values": ["enterprise"], "negate": false}]
                }],
                "prerequisites": [],
                "salt": "7e2f4a9c1b3d5e6f"
            },
            "dark-mode": {
                "key": "dark-mode", "version": 7, "on": false,
                "variations": [false, true],
                "fallthrough": {"variation": 1},
                "offVariation": 0,
                "targets": [], "rules": [], "prerequisites": [],
                "salt": "5b8e2d7c4a1f9e3b"
            },
            "express-shipping": {
                "key": "express-shipping", "version": 3, "on": true,
                "variations": [false, true],
                "fallthrough": {"variation": 1},
                "offVariation": 0,
                "targets": [], "rules": [],
                "prerequisites": [{"key": "new-checkout-flow", "variation": 1}],
                "salt": "a4c6e8f0b2d4e6f8"
            }
        },
        "segments": {
            "beta-testers": {
                "key": "beta-testers", "version": 1,
                "included": ["carol", "dave"], "excluded": [],
                "rules": [], "salt": "f1e2d3c4b5a69788"
            },
            "enterprise-accounts": {
                "key": "enterprise-accounts", "version": 1,
                "included": [], "excluded": [],
                "rules": [{"clauses": [{"attribute": "plan", "op": "in",
                                        "values": ["enterprise"], "negate": false}]}],
                "salt": "0a1b2c3d4e5f6071"
            }
        }
    })
}

/// One scripted change: which flag, and a function making the new flag from the old.
pub struct Step {
    pub key: &'static str,
    pub describe: &'static str,
    pub apply: fn(&mut Value),
}

/// The changes the demo cycles through.
pub const STEPS: &[Step] = &[
    Step {
        key: "dark-mode",
        describe: "turn dark-mode on",
        apply: |f| f["on"] = json!(true),
    },
    Step {
        key: "new-checkout-flow",
        describe: "roll new-checkout-flow out to 50%",
        apply: |f| {
            f["fallthrough"] = json!({"rollout": {"variations": [
                {"variation": 0, "weight": 50000}, {"variation": 1, "weight": 50000}]}});
        },
    },
    Step {
        key: "search-ranking",
        describe: "search-ranking: serve semantic-v1 by default",
        apply: |f| f["fallthrough"] = json!({"variation": 1}),
    },
    Step {
        key: "max-upload-mb",
        describe: "max-upload-mb: add a rule for beta testers",
        apply: |f| {
            if let Some(rules) = f["rules"].as_array_mut() {
                rules.push(json!({
                    "id": "beta", "variation": 2,
                    "clauses": [{"attribute": "segmentMatch", "op": "segmentMatch",
                                 "values": ["beta-testers"], "negate": false}]
                }));
            }
        },
    },
    Step {
        key: "new-checkout-flow",
        describe: "turn new-checkout-flow off (express-shipping depends on it)",
        apply: |f| f["on"] = json!(false),
    },
    Step {
        key: "dark-mode",
        describe: "turn dark-mode off",
        apply: |f| f["on"] = json!(false),
    },
    Step {
        key: "max-upload-mb",
        describe: "max-upload-mb: remove the beta rule",
        apply: |f| {
            if let Some(rules) = f["rules"].as_array_mut() {
                rules.retain(|r| r["id"] != "beta");
            }
        },
    },
    Step {
        key: "new-checkout-flow",
        describe: "turn new-checkout-flow back on",
        apply: |f| f["on"] = json!(true),
    },
    Step {
        key: "search-ranking",
        describe: "search-ranking: back to classic",
        apply: |f| f["fallthrough"] = json!({"variation": 0}),
    },
];

pub(crate) async fn demo(args: DemoArgs) -> Result<(), CliError> {
    let duration = seconds("--duration", args.duration)?;
    let interval = seconds("--interval", Some(args.interval))?
        .unwrap_or_default()
        .max(Duration::from_millis(100));
    let sdk_key = "sdk-demo-0123456789";
    let server = Server::builder()
        .sdk_key(Some(sdk_key.into()))
        .env_id(Some("demo-environment".into()))
        .data(sample_data())
        .start()
        .map_err(|e| CliError::failed(format!("cannot start the demo server: {e}")))?;
    let server = Arc::new(server);
    let (flags, segments) = counts(&server);
    if !args.json {
        println!(
            "flagsync demo: a local flag server on {} with {} and {}.",
            server.url(),
            plural(flags, "flag", "flags"),
            plural(segments, "segment", "segments")
        );
        println!(
            "It changes a flag every {:.1} s; a flagsync Client ({}) prints what it sees. {}",
            interval.as_secs_f64(),
            match args.fdv2 {
                Some(preset) => preset.describe(),
                None if args.polling => "polling",
                None => "streaming",
            },
            match duration {
                Some(d) => format!("Stopping after {:.0} s.", d.as_secs_f64()),
                None => "Press Ctrl-C to stop.".into(),
            }
        );
    }
    let opts = Options {
        sdk_key: sdk_key.into(),
        stream_uri: server.url(),
        polling_uri: server.url(),
        polling: args.polling,
        filter: None,
        fdv2: args.fdv2,
        redis: None,
        events_uri: None,
        max_event_bytes: None,
        ca_pem: None,
        big_segments: false,
    };
    let mut session = Session::start(&opts).map_err(CliError::failed)?;
    let mut printer = Printer::new(args.json);

    let changer_server = server.clone();
    let json_out = args.json;
    let start = printer.start;
    let changer = tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        for step in STEPS.iter().cycle() {
            tick.tick().await;
            let Some(mut flag) = changer_server.flag(step.key) else {
                continue;
            };
            (step.apply)(&mut flag);
            if let Some(obj) = flag.as_object_mut() {
                obj.remove("version"); // the server bumps it
            }
            if let Ok(v) = changer_server.set_flag(step.key, flag) {
                let t = start.elapsed().as_secs_f64();
                if json_out {
                    println!(
                        "{}",
                        json!({"type": "server", "change": step.describe, "key": step.key, "version": v, "t": (t * 1000.0).round() / 1000.0})
                    );
                } else {
                    println!("[{t:7.3}s] server: {} (v{v})", step.describe);
                }
            }
        }
    });
    let result = print_updates(&mut session, &mut printer, duration, None).await;
    changer.abort();
    let _ = changer.await;
    session.close().await;
    let changes = printer.changes;
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    if !args.json {
        println!(
            "demo finished: the client saw {}.",
            plural(changes, "flag change", "flag changes")
        );
    }
    result
}
