//! The whole FDv1 data system driven by an arbitrary input script, with the core's
//! invariants checked after every drain (see `flagsync_core::testing::ScriptRun`).
#![no_main]

use flagsync_core::testing::{ScriptRun, Step, origin};
use flagsync_core::{Config, DataSystem, Mode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (bool, Vec<Step>)| {
    let (polling, steps) = input;
    let mut config = Config::new("fuzz-key");
    config.stream_uri = "http://127.0.0.1:1".into();
    config.polling_uri = "http://127.0.0.1:2".into();
    config.mode = if polling {
        Mode::Polling
    } else {
        Mode::Streaming
    };
    config.limits.sse.max_line_len = 4096;
    config.limits.sse.max_event_len = 4096;
    config.limits.max_poll_body = 4096;
    let t0 = origin();
    let Ok(system) = DataSystem::new(config, 1, t0) else {
        return;
    };
    let mut run = ScriptRun::new(system, t0);
    for step in &steps {
        run.step(step);
    }
});
