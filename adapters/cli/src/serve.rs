//! `flagsync serve`: the local flag server, its data file (reloaded when it changes)
//! or Redis, and the injected faults.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flagsync_core::Kind;
use flagsync_core::datafile::{Format, RawDataSet};
use flagsync_server::{ServerError, ServerHandle};

use flagsync::persist::{CacheConfig, CachingStore};

use crate::args::ServeArgs;
use crate::error::CliError;
use crate::events;
use crate::printer::plural;

/// Read a flag data file (JSON, or YAML by its `.yaml`/`.yml` extension) with the
/// loader the SDK's file data source uses ([`flagsync_core::datafile`]), as
/// `{"flags":{…},"segments":{…}}` (`flagValues` made into flags).
pub(crate) fn read_data(path: &Path) -> Result<RawDataSet, CliError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CliError::usage(format!(
            "cannot read the flag data file {}: {e}",
            path.display()
        ))
    })?;
    let format = Format::of_file_name(&path.to_string_lossy());
    // Items stay slices of the file's bytes: the server holds the file, not values.
    RawDataSet::parse(bytes.into(), format).map_err(|e| {
        CliError::usage(format!(
            "{}: {e}. Expected {{\"flags\":{{…}},\"segments\":{{…}}}}, as `flagsync snapshot` prints, or LaunchDarkly's flag file format",
            path.display()
        ))
    })
}

pub(crate) fn data_error(path: &Path, e: ServerError) -> CliError {
    match e {
        ServerError::InvalidData(msg) => CliError::usage(format!("{}: {msg}", path.display())),
        other => CliError::failed(other.to_string()),
    }
}

pub(crate) fn counts(server: &ServerHandle) -> (usize, usize) {
    server.item_counts()
}

/// Where `serve` gets its flag data.
pub(crate) enum ServeSource {
    File(PathBuf),
    /// Redis (read uncached), and `host:port/db (prefix p)` for people.
    Redis(Box<CachingStore>, String),
}

impl ServeSource {
    fn new(args: &ServeArgs) -> Result<Self, CliError> {
        if let Some(opts) = args.redis.options(true)? {
            let store = opts.store().map_err(CliError::usage)?;
            let name = format!("Redis {} (prefix {})", store.target(), store.prefix());
            return Ok(Self::Redis(
                Box::new(CachingStore::new(Arc::new(store), CacheConfig::disabled())),
                name,
            ));
        }
        match &args.data {
            Some(path) => Ok(Self::File(path.clone())),
            None => Err(CliError::usage(
                "give the flag data with --data FILE or --redis URL (or --redis-sentinel, --redis-cluster)",
            )),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::File(path) => path.display().to_string(),
            Self::Redis(_, name) => name.clone(),
        }
    }

    /// The data: its items as raw JSON.
    async fn load(&self) -> Result<RawDataSet, CliError> {
        match self {
            Self::File(path) => read_data(path),
            Self::Redis(store, name) => {
                let mut data = RawDataSet::default();
                for kind in [Kind::Flag, Kind::Segment] {
                    let items = store.all(kind).await.map_err(|e| {
                        CliError::failed(format!("cannot read the flags from {name}: {e}. Is Redis running, and is --redis right?"))
                    })?;
                    for (key, item) in items.iter() {
                        if item.deleted {
                            continue;
                        }
                        let item = RawDataSet::item(kind, key, &item.raw, item.version)
                            .map_err(|e| CliError::failed(format!("{name}: {key}: {e}")))?;
                        data.map_mut(kind).insert(key.clone(), item);
                    }
                }
                Ok(data)
            }
        }
    }

    fn error(&self, e: ServerError) -> CliError {
        match self {
            Self::File(path) => data_error(path, e),
            Self::Redis(_, name) => CliError::failed(format!("{name}: {e}")),
        }
    }
}

pub(crate) async fn serve(args: ServeArgs) -> Result<(), CliError> {
    if args.relay.is_some() || args.upstream.is_some() {
        return crate::relay::relay(args).await;
    }
    let source = ServeSource::new(&args)?;
    let data = source.load().await?;
    let mut filters = Vec::with_capacity(args.filter_data.len());
    for spec in &args.filter_data {
        let Some((key, path)) = spec
            .split_once('=')
            .filter(|(k, p)| !k.is_empty() && !p.is_empty())
        else {
            return Err(CliError::usage(format!(
                "--filter-data {spec:?}: expected KEY=FILE"
            )));
        };
        let path = PathBuf::from(path);
        filters.push((key.to_owned(), file_stamp(&path), path));
    }
    // Redis is read every second: what was served last tells a change. (A file tells
    // by its modification time, so its data is not kept twice.)
    let mut last = matches!(source, ServeSource::Redis(..)).then(|| data.clone());
    let fds = crate::network::raise_fd_limit();
    let builder = crate::network::server_builder(&args, None)?
        .sdk_key(args.sdk_key.clone())
        .data(data);
    let mut builder = args.client.apply(builder, args.sdk_key.is_some())?;
    for (key, _, path) in &filters {
        builder = builder.filtered_data(key.clone(), read_data(path)?);
    }
    let server = builder
        .start()
        .map_err(|e| crate::error::start_error(e, |other| source.error(other)))?;
    // With `--events -`, standard output is for the events alone.
    let to_stderr = args.events.as_deref() == Some(Path::new("-"));
    macro_rules! say {
        ($($arg:tt)*) => {
            if to_stderr { eprintln!($($arg)*) } else { println!($($arg)*) }
        };
    }
    let event_log = match &args.events {
        Some(path) => Some(events::EventLog::start(&server, path).map_err(|e| {
            CliError::usage(format!("cannot write events to {}: {e}", path.display()))
        })?),
        None => None,
    };
    let faults = apply_faults(&server, &args);
    let (flags, segments) = counts(&server);
    let url = server.url();
    say!("flagsync: serving on {url}");
    say!(
        "  {} and {} from {}",
        plural(flags, "flag", "flags"),
        plural(segments, "segment", "segments"),
        source.describe()
    );
    say!("  FDv1 streaming: GET {url}/all");
    say!("  FDv1 polling:   GET {url}/sdk/latest-all");
    say!("  FDv2 streaming: GET {url}/sdk/stream");
    say!("  FDv2 polling:   GET {url}/sdk/poll");
    let shown = match &args.events {
        Some(_) if to_stderr => " (shown on standard output)".to_owned(),
        Some(path) => format!(" (written to {})", path.display()),
        None => String::new(),
    };
    say!("  events:         POST {url}/bulk, POST {url}/diagnostic{shown}");
    let id = args.client.client_side_id.as_deref().unwrap_or("ID");
    say!(
        "  client-side:    GET {url}/sdk/evalx/{id}/contexts/CTX, GET {url}/eval/{id}/CTX (streaming), POST {url}/events/bulk/{id}"
    );
    say!(
        "  mobile:         GET {url}/msdk/evalx/contexts/CTX, GET {url}/meval/CTX (streaming), POST {url}/mobile/events/bulk"
    );
    say!("  health:         GET {url}/status, GET {url}/metrics (Prometheus)");
    say!("  descriptors:    {fds}");
    if server.addrs().len() > 1 {
        let all: Vec<String> = server.addrs().iter().map(ToString::to_string).collect();
        say!("  listening on:   {}", all.join(", "));
    }
    for (key, _, path) in &filters {
        say!(
            "  filter {key}: {} (requests with ?filter={key})",
            path.display()
        );
    }
    for fault in &faults {
        say!("  fault:          {fault}");
    }
    // Never echo the key itself: it may be a real one.
    let key_hint = if args.sdk_key.is_some() {
        " --sdk-key KEY"
    } else {
        ""
    };
    say!("  try:            flagsync watch --stream-uri {url}{key_hint} [--fdv2 default]");
    match source {
        ServeSource::File(_) => {
            say!("Edits to the file are pushed to clients. Press Ctrl-C to stop.")
        }
        ServeSource::Redis(..) => {
            say!("Changes in Redis are pushed to clients. Press Ctrl-C to stop.")
        }
    }

    let mut modified = args.data.as_deref().and_then(file_stamp);
    let mut failing = false;
    // A file costs one stat a check: checked ten times a second, an edit reaches
    // clients well within a second. Redis is read once a second.
    let every = match source {
        ServeSource::File(_) => Duration::from_millis(100),
        ServeSource::Redis(..) => Duration::from_secs(1),
    };
    let mut tick = tokio::time::interval(every);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    // A file is also watched (inotify and the like): an edit is read at once, not at
    // the next check.
    let (wake, mut woken) = tokio::sync::mpsc::channel::<()>(1);
    let _watcher = match &source {
        ServeSource::File(path) => {
            let paths = std::iter::once(path).chain(filters.iter().map(|(_, _, p)| p));
            watch_files(paths, wake)
        }
        ServeSource::Redis(..) => None,
    };
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = tick.tick() => {}
            Some(()) = woken.recv() => {}
        }
        for (key, stamp, path) in &mut filters {
            let now = file_stamp(path);
            if now == *stamp {
                continue;
            }
            *stamp = now;
            let env = server.environment(&format!("default/{key}"));
            match read_data(path).and_then(|d| {
                env.map_or(Ok(()), |env| {
                    env.replace_all(d).map_err(|e| data_error(path, e))
                })
            }) {
                Ok(()) => say!("reloaded {} (filter {key})", path.display()),
                Err(e) => eprintln!(
                    "flagsync: not reloaded (still serving the previous data): {}",
                    e.message
                ),
            }
        }
        if let ServeSource::File(path) = &source {
            let now = file_stamp(path);
            if now == modified {
                continue;
            }
            modified = now;
        }
        let loaded = source.load().await;
        if let ServeSource::Redis(..) = &source {
            // Polled every second: report a failure once, and only changes.
            match &loaded {
                Err(e) if !failing => {
                    eprintln!("flagsync: {} (still serving the previous data)", e.message)
                }
                Ok(_) if failing => eprintln!("flagsync: {} answers again", source.describe()),
                _ => {}
            }
            failing = loaded.is_err();
            if loaded.as_ref().is_ok_and(|d| Some(d) == last.as_ref()) || failing {
                continue;
            }
        }
        match loaded.and_then(|d| {
            if last.is_some() {
                last = Some(d.clone());
            }
            server.replace_all(d).map_err(|e| source.error(e))
        }) {
            Ok(()) => {
                let (f, s) = counts(&server);
                say!(
                    "reloaded {}: {} and {}, sent to {}",
                    source.describe(),
                    plural(f, "flag", "flags"),
                    plural(s, "segment", "segments"),
                    plural(server.open_streams(), "stream", "streams"),
                );
            }
            Err(e) => eprintln!(
                "flagsync: not reloaded (still serving the previous data): {}",
                e.message
            ),
        }
    }
    say!("stopping");
    tokio::task::spawn_blocking(move || {
        server.shutdown();
        if let Some(log) = event_log {
            log.finish();
        }
    })
    .await
    .map_err(|e| CliError::failed(e.to_string()))
}

/// Watch the folders of `paths` for changes (a file replaced by a rename is seen too):
/// each wakes `wake`. `None` where the platform cannot watch (the checks every 100 ms
/// still see every edit).
fn watch_files<'a>(
    paths: impl Iterator<Item = &'a PathBuf>,
    wake: tokio::sync::mpsc::Sender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |_: notify::Result<notify::Event>| {
        // Full: a wake-up is pending already, which reads every file.
        let _ = wake.try_send(());
    })
    .ok()?;
    for path in paths {
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        watcher
            .watch(folder, notify::RecursiveMode::NonRecursive)
            .ok()?;
    }
    Some(watcher)
}

/// Set the faults `args` asks for; one line describing each.
pub(crate) fn apply_faults(server: &ServerHandle, args: &ServeArgs) -> Vec<String> {
    let times = |n: usize, what: &str| match n {
        usize::MAX => format!("every {what}"),
        1 => format!("the first {what}"),
        _ => format!("the first {n} {what}s"),
    };
    let mut faults = Vec::new();
    if args.fdv1_fallback {
        server.fdv1_fallback(true);
        faults.push("X-LD-FD-Fallback: true on every FDv2 response".to_owned());
    }
    if let Some(n) = args.goodbye.filter(|n| *n > 0) {
        server.goodbye_next(n);
        faults.push(format!(
            "a goodbye after the first payload of {}",
            times(n, "FDv2 stream")
        ));
    }
    if let Some(n) = args.payload_error.filter(|n| *n > 0) {
        server.payload_error_next(n);
        faults.push(format!(
            "an error event half-way through {}",
            times(n, "FDv2 full payload")
        ));
    }
    for (endpoint, status) in &args.fail {
        server.fail_endpoint(*endpoint, Some(*status));
        faults.push(format!("{endpoint} answers HTTP {status}"));
    }
    for endpoint in &args.hang {
        server.hang_endpoint(*endpoint, true);
        faults.push(format!("{endpoint} never answers"));
    }
    faults
}

/// What tells that a file changed: its modification time and length.
pub(crate) fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
