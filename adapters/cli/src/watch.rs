//! `flagsync watch`: connect a client and print what it sees.

use std::io::IsTerminal;

use crate::client::Session;

use crate::args::{WatchArgs, seconds};
use crate::error::CliError;
use crate::options::{describe_mode, describe_redis, resolve, source_name};
use crate::printer::{Evaluations, Printer, Progress, print_updates};

pub(crate) async fn watch(args: WatchArgs) -> Result<(), CliError> {
    let duration = seconds("--duration", args.duration)?;
    let mut opts = resolve(args.conn)?;
    opts.big_segments = args.big_segments;
    let evaluations = if args.evaluate.is_empty() {
        None
    } else {
        let context: flagsync::eval::Context = serde_json::from_str(&args.context)
            .map_err(|e| CliError::usage(format!("--context is not a valid context: {e}")))?;
        opts.events_uri = Some(args.events_uri.unwrap_or_else(|| opts.stream_uri.clone()));
        Some(Evaluations {
            keys: args.evaluate,
            context,
        })
    };
    eprintln!(
        "connecting to {} ({}{})…",
        source_name(&opts),
        describe_mode(&opts),
        describe_redis(&opts)
    );
    log_core_warnings();
    let mut session = Session::start(&opts).map_err(CliError::usage)?;
    let mut printer = Printer::new(args.json);
    if args.progress || std::io::stderr().is_terminal() {
        printer.progress = Some(Progress {
            terminal: std::io::stderr().is_terminal(),
        });
    }
    let result = print_updates(&mut session, &mut printer, duration, evaluations.as_ref()).await;
    session.close().await;
    result
}

/// The core's warnings on standard error: data taken though doubtful (a key that was
/// not UTF-8, a body naming another key, an FDv2 change older than the stored item),
/// a redirect refused. Without this, `watch` would take such data silently.
fn log_core_warnings() {
    crate::logs::warnings_to_stderr("flagsync_core");
}
