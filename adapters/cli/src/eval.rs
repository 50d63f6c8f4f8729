//! `flagsync eval`: the flags of a data file evaluated for one context, offline, with
//! the engine the SDK evaluates with, over the data exactly as `serve` would serve it.

use std::collections::HashMap;
use std::sync::Arc;

use flagsync::eval::Context;
use flagsync::eval::engine::{Flag, Options, Segment, Store, evaluate};
use flagsync_server::Server;
use serde_json::{Map, Value, json};

use crate::args::EvalArgs;
use crate::error::CliError;
use crate::serve::{data_error, read_data};

/// The compiled flags and segments of one data set.
struct Compiled {
    flags: HashMap<String, Arc<Flag>>,
    segments: HashMap<String, Arc<Segment>>,
}

impl Store for Compiled {
    fn flag(&self, key: &str) -> Option<Arc<Flag>> {
        self.flags.get(key).cloned()
    }

    fn segment(&self, key: &str) -> Option<Arc<Segment>> {
        self.segments.get(key).cloned()
    }
}

pub(crate) fn eval(args: &EvalArgs) -> Result<(), CliError> {
    let raw = read_data(&args.data)?;
    let rendered = Server::builder()
        .data(raw)
        .render_data()
        .map_err(|e| data_error(&args.data, e))?;
    let data: Value = serde_json::from_str(&rendered)
        .map_err(|e| CliError::failed(format!("the rendered data is not JSON: {e}")))?;
    let context: Context = serde_json::from_str(&args.context)
        .map_err(|e| CliError::usage(format!("--context is not a valid context: {e}")))?;
    let items = |kind: &str| data[kind].as_object().cloned().unwrap_or_default();
    let mut compiled = Compiled {
        flags: HashMap::new(),
        segments: HashMap::new(),
    };
    let mut malformed = Vec::new();
    for (key, item) in items("flags") {
        match Flag::from_json(item.to_string().as_bytes(), &key) {
            Ok(flag) => {
                compiled.flags.insert(key, Arc::new(flag));
            }
            Err(_) => malformed.push(key),
        }
    }
    for (key, item) in items("segments") {
        if let Ok(segment) = Segment::from_json(item.to_string().as_bytes(), &key) {
            compiled.segments.insert(key, Arc::new(segment));
        }
    }
    let mut keys: Vec<String> = if args.flag.is_empty() {
        items("flags").keys().cloned().collect()
    } else {
        args.flag.clone()
    };
    keys.sort();
    keys.dedup();
    let mut out = Map::new();
    for key in keys {
        let shown = match compiled.flags.get(&key) {
            Some(flag) => {
                let detail = evaluate(&compiled, flag, &context, Options::default());
                json!({
                    "value": detail.value,
                    "variationIndex": detail.variation_index,
                    "reason": detail.reason,
                })
            }
            None => {
                let error = if malformed.contains(&key) {
                    "MALFORMED_FLAG"
                } else {
                    "FLAG_NOT_FOUND"
                };
                json!({"value": null, "variationIndex": null,
                       "reason": {"kind": "ERROR", "errorKind": error}})
            }
        };
        out.insert(key, shown);
    }
    println!("{}", Value::Object(out));
    Ok(())
}
