//! What the libraries log that the command line shows: warnings on standard error.

/// Warnings (and worse) logged under `target` (a crate, such as `flagsync_core`) on
/// standard error, without time or target; nothing else is shown. Installed once: a
/// second call does nothing.
pub(crate) fn warnings_to_stderr(target: &'static str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let only = tracing_subscriber::filter::Targets::new()
        .with_target(target, tracing_subscriber::filter::LevelFilter::WARN);
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .finish()
        .with(only)
        .try_init();
}
