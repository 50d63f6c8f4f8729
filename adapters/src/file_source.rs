//! [`FileDataSource`]: flags from LaunchDarkly's flag data files, reloaded when a file
//! changes.
//!
//! The files are in LaunchDarkly's file data source format (`flags`, `flagValues`,
//! `segments`; JSON, or YAML with the `yaml` feature, by extension), read by the same
//! loader as `flagsync serve --data`: [`flagsync_core::datafile`]. Several files merge;
//! a flag or segment defined in two of them is an error.
//!
//! **Reloading** polls: every [`FileOptions::reload`] interval each file is `stat`ed,
//! and when one's modification time or length changed, all are read again. Polling
//! was chosen over file-system notifications (`notify`): it works the same on every
//! platform, file system (network and container mounts included) and runtime, needs
//! no thread of its own, and costs one `stat` per file per interval; an edit shows
//! within one interval. A reload that fails (a malformed or missing file, a
//! duplicate) keeps the data loaded before and reports the status INTERRUPTED with
//! INVALID_DATA (a file that cannot be read: UNKNOWN); the next good load makes it
//! VALID again. Item versions only move forward across loads
//! ([`DataSet::carry_versions`]), so an edited flag reaches
//! [`Client::flag_changes`](crate::Client::flag_changes) even when the file does not
//! touch its version.
//!
//! Files are read on the client's runtime with blocking `std::fs` calls: flag files
//! are small, and a read is a few microseconds; [`FileOptions::max_file_size`] bounds
//! it.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flagsync_core::ErrorKind;
use flagsync_core::datafile::{DataSet, Format};

use crate::external::{DataSource, ExternalSource, Feed};
use crate::runtime::{BoxFuture, Runtime};

/// How a [`FileDataSource`] reads its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileOptions {
    /// Check the files for changes this often (default 1 s); `None`: read them once.
    pub reload: Option<Duration>,
    /// A larger file is refused (default 64 MiB, as the largest FDv1 `put`).
    pub max_file_size: u64,
}

impl Default for FileOptions {
    fn default() -> Self {
        Self {
            reload: Some(Duration::from_secs(1)),
            max_file_size: 64 << 20,
        }
    }
}

impl FileOptions {
    /// Check for changes every `interval` (`None`: read once).
    pub fn reload(mut self, interval: Option<Duration>) -> Self {
        self.reload = interval;
        self
    }

    /// Refuse files larger than `bytes`.
    pub fn max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes;
        self
    }
}

/// Flags from files, for [`ClientBuilder::data_source`](crate::ClientBuilder::data_source)
/// (or [`ClientBuilder::file_data_source`](crate::ClientBuilder::file_data_source)).
/// See the [module docs](self).
///
/// ```no_run
/// use flagsync::file_source::{FileDataSource, FileOptions};
///
/// let files = FileDataSource::new(["flags.json", "segments.yaml"], FileOptions::default());
/// let client = flagsync::Client::builder("sdk-key").data_source(files).build()?;
/// # Ok::<(), flagsync::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FileDataSource {
    paths: Vec<PathBuf>,
    options: FileOptions,
}

impl FileDataSource {
    /// Read `paths` (merged, in this order) as `options` says.
    pub fn new<P: Into<PathBuf>>(paths: impl IntoIterator<Item = P>, options: FileOptions) -> Self {
        Self {
            paths: paths.into_iter().map(Into::into).collect(),
            options,
        }
    }

    /// Each file's modification time and length (`None` if it cannot be `stat`ed).
    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.paths
            .iter()
            .map(|p| {
                let meta = std::fs::metadata(p).ok()?;
                Some((meta.modified().ok()?, meta.len()))
            })
            .collect()
    }

    /// Read, parse and merge every file.
    fn load(&self) -> Result<DataSet, (ErrorKind, String)> {
        let mut files = Vec::with_capacity(self.paths.len());
        for path in &self.paths {
            let name = path.display().to_string();
            let bytes = read_limited(path, self.options.max_file_size)
                .map_err(|e| (ErrorKind::Unknown, format!("cannot read {name}: {e}")))?;
            let data = DataSet::parse(&bytes, Format::of_file_name(&name))
                .map_err(|e| (ErrorKind::InvalidData, format!("{name}: {e}")))?;
            files.push((name, data));
        }
        DataSet::merge(files).map_err(|e| (ErrorKind::InvalidData, e.to_string()))
    }
}

fn read_limited(path: &std::path::Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "larger than the limit of {max} bytes"
        )));
    }
    Ok(bytes)
}

impl ExternalSource for FileDataSource {
    fn run(&self, rt: Arc<dyn Runtime>, feed: Feed) -> BoxFuture<'static, ()> {
        let this = self.clone();
        Box::pin(async move {
            let mut seen = None;
            let mut loaded = DataSet::default();
            loop {
                let stamps = this.stamps();
                if seen.as_ref() != Some(&stamps) {
                    seen = Some(stamps);
                    let result = this.load().and_then(|mut data| {
                        data.carry_versions(&loaded);
                        let changes = data
                            .change_set()
                            .map_err(|e| (ErrorKind::InvalidData, e.to_string()))?;
                        Ok((data, changes))
                    });
                    let fed = match result {
                        Ok((data, changes)) => {
                            loaded = data;
                            feed.data(changes).await
                        }
                        Err((kind, message)) => {
                            tracing::debug!(%message, "flag files not loaded");
                            feed.failed(kind, message).await
                        }
                    };
                    if !fed {
                        break;
                    }
                }
                match this.options.reload {
                    Some(every) => rt.sleep_until(rt.now() + every).await,
                    None => std::future::pending::<()>().await,
                }
            }
        })
    }
}

impl From<FileDataSource> for DataSource {
    fn from(files: FileDataSource) -> Self {
        Self(Arc::new(files))
    }
}
