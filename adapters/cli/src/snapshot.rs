//! `flagsync snapshot`: connect, wait for the data, print it as JSON.

use std::time::Instant;

use flagsync::State;
use flagsync_core::Kind;

use crate::client::{Session, StatusSummary, Update};

use crate::args::{SnapshotArgs, seconds};
use crate::error::CliError;
use crate::options::{resolve, source_name};
use crate::printer::describe_error;
use crate::printer::plural;

pub(crate) async fn snapshot(args: SnapshotArgs) -> Result<(), CliError> {
    let timeout = seconds("--timeout", Some(args.timeout))?.unwrap_or_default();
    let opts = resolve(args.conn)?;
    let uri = source_name(&opts);
    let mut session = Session::start(&opts).map_err(CliError::usage)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last: Option<StatusSummary> = None;
    let started = Instant::now();
    let outcome = loop {
        let update = tokio::select! {
            u = session.next() => u,
            () = tokio::time::sleep_until(deadline) => {
                let why = last
                    .as_ref()
                    .and_then(|s| s.error.as_ref())
                    .map(|e| format!(" (last error: {})", describe_error(e)))
                    .unwrap_or_default();
                break Err(CliError::failed(format!(
                    "timed out after {:.1} s waiting for flag data from {uri}{why}. Raise --timeout, or check the URI",
                    timeout.as_secs_f64()
                )));
            }
        };
        match update {
            Some(Update::Ready) => break Ok(session.snapshot()),
            Some(Update::Status(s)) => {
                if let Some(e) = &s.error {
                    if e.permanent_store_fault {
                        break Err(CliError::failed(format!(
                            "{}. Check the --redis URL (password, database)",
                            e.message
                        )));
                    }
                    if e.key_rejected() {
                        break Err(CliError::failed(format!(
                            "the SDK key was rejected by {uri} (HTTP {}): check --sdk-key or FLAGSYNC_SDK_KEY",
                            e.status_code
                        )));
                    }
                    if e.unreachable() {
                        break Err(CliError::failed(format!(
                            "cannot reach {uri}: {}. Is the service running, and is the URI right (--stream-uri/--polling-uri)?",
                            e.message
                        )));
                    }
                    if s.state == State::Off {
                        break Err(CliError::failed(format!(
                            "{uri} refused the connection for good: {}",
                            describe_error(e)
                        )));
                    }
                }
                last = Some(s);
            }
            Some(Update::FlagChanged(_) | Update::Source(_) | Update::Store(..)) => {}
            None => {
                break Err(CliError::failed(
                    "the client stopped before it had the flag data",
                ));
            }
        }
    };
    let skipped = session.skipped_items();
    session.close().await;
    let snap = outcome?;
    if skipped > 0 {
        eprintln!(
            "flagsync: warning: {} in the store could not be decoded and {} skipped",
            plural(skipped as usize, "item", "items"),
            if skipped == 1 { "was" } else { "were" }
        );
    }
    eprintln!(
        "got {} and {} in {} ms",
        plural(snap.len(Kind::Flag), "flag", "flags"),
        plural(snap.len(Kind::Segment), "segment", "segments"),
        started.elapsed().as_millis()
    );
    println!("{}", snap.to_json());
    Ok(())
}
