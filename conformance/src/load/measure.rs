//! What `sse-load` measures and changes outside its streams: latency percentiles, the
//! memory and CPU of the serving process (`/proc/PID/status`, `/proc/PID/stat`), and
//! the data file whose edits are the changes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

/// Key of the flag that `sse-load` changes in the data file.
pub const LOAD_FLAG: &str = "load-flag";
/// Stands for the marker in the serialized data file until a change writes it.
const PLACEHOLDER: &str = "@@sse-load-marker@@";

/// Latency percentiles (nearest rank) of a set of samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// How many samples.
    pub count: usize,
    /// Smallest sample.
    pub min: Duration,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl Percentiles {
    /// The percentiles of `samples` (sorted in place); all zero when there are none.
    pub fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let rank = |p: usize| {
            let n = samples.len();
            samples[(n * p).div_ceil(100).clamp(1, n) - 1]
        };
        if samples.is_empty() {
            return Self::default();
        }
        Self {
            count: samples.len(),
            min: samples[0],
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            max: samples[samples.len() - 1],
        }
    }

    /// `{"min":…,"p50":…,"p90":…,"p99":…,"max":…}` in milliseconds.
    pub fn to_json(self) -> Value {
        json!({"min": ms(self.min), "p50": ms(self.p50), "p90": ms(self.p90), "p99": ms(self.p99), "max": ms(self.max)})
    }

    /// `min … / p50 … / p90 … / p99 … / max … ms` for people.
    pub fn describe(self) -> String {
        if self.count == 0 {
            return "no samples".to_owned();
        }
        format!(
            "min {:.1} / p50 {:.1} / p90 {:.1} / p99 {:.1} / max {:.1} ms",
            ms(self.min),
            ms(self.p50),
            ms(self.p90),
            ms(self.p99),
            ms(self.max)
        )
    }
}

/// A duration in milliseconds, to 0.1 ms.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// One reading of a process's memory and CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// Resident set, kB (`VmRSS`).
    pub rss_kb: u64,
    /// Peak resident set so far, kB (`VmHWM`).
    pub hwm_kb: u64,
    /// Threads.
    pub threads: u64,
    /// User plus system CPU time, in clock ticks (`utime + stime`).
    pub ticks: u64,
    /// The process has exited and not been reaped (state `Z`).
    pub is_zombie: bool,
}

impl ProcSample {
    /// Read process `pid` (`None`: this process).
    pub fn read(pid: Option<u32>) -> io::Result<Self> {
        let dir = pid.map_or_else(|| "/proc/self".to_owned(), |p| format!("/proc/{p}"));
        let status = fs::read_to_string(format!("{dir}/status"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
                .unwrap_or(0)
        };
        let stat = fs::read_to_string(format!("{dir}/stat"))?;
        // The command name (field 2) may hold spaces: count fields after its ')'.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
        // utime and stime are fields 14 and 15; `after` starts at field 3.
        let ticks = match (tick(11), tick(12)) {
            (Some(user), Some(system)) => user + system,
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "bad stat")),
        };
        Ok(Self {
            rss_kb: field("VmRSS:"),
            hwm_kb: field("VmHWM:"),
            threads: field("Threads:"),
            ticks,
            is_zombie: fields.first() == Some(&"Z"),
        })
    }

    /// `{"rss_kb":…,"hwm_kb":…,"threads":…}`.
    pub fn to_json(self) -> Value {
        json!({"rss_kb": self.rss_kb, "hwm_kb": self.hwm_kb, "threads": self.threads})
    }
}

/// CPU time of a sample, in seconds.
pub fn cpu_seconds(sample: ProcSample) -> f64 {
    sample.ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// CPU use between two samples `elapsed` apart, in percent of one core.
pub fn cpu_percent(from: ProcSample, to: ProcSample, elapsed: Duration) -> f64 {
    let ticks_per_second = rustix::param::clock_ticks_per_second() as f64;
    let busy = to.ticks.saturating_sub(from.ticks) as f64 / ticks_per_second;
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        (busy / secs * 1000.0).round() / 10.0
    } else {
        0.0
    }
}

/// The kernel's count of connections dropped because a listen queue was full
/// (`TcpExt: ListenOverflows` in `/proc/net/netstat`), for this network namespace as a
/// whole: a connect that overflows the server's accept backlog is retried by the
/// client's kernel a second later (SYN retransmission), and shows as connect latency.
pub fn listen_overflows() -> Option<u64> {
    let text = fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let at = names
        .split_whitespace()
        .position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// The data file that `flagsync serve --data` watches, rewritten for each change.
///
/// It is read once: every write is that data with flag [`LOAD_FLAG`] (added if missing)
/// carrying the change's marker as its `salt`, so that each change is one edit of one
/// flag and tells itself apart. The file is replaced atomically (written beside it,
/// then renamed), so the server never reads half a file.
#[derive(Debug)]
pub struct Trigger {
    path: PathBuf,
    temp: PathBuf,
    /// The serialized data up to the marker and after it.
    before: Vec<u8>,
    after: Vec<u8>,
}

impl Trigger {
    /// Read the data file at `path` (JSON: `{"flags":{…},…}`). With `served`, the
    /// marker is the value the flag serves (its second variation, the fallthrough),
    /// and the flag is available to client-side SDKs: client-side streams carry
    /// evaluated flags, not their salt.
    pub fn load(path: &Path, served: bool) -> Result<Self, String> {
        let text = fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut data: Value = serde_json::from_slice(&text).map_err(|e| {
            format!(
                "{}: not JSON ({e}); --trigger-file takes a JSON flag data file",
                path.display()
            )
        })?;
        let Some(root) = data.as_object_mut() else {
            return Err(format!("{}: not a JSON object", path.display()));
        };
        let flags = root.entry("flags").or_insert_with(|| json!({}));
        let Some(flags) = flags.as_object_mut() else {
            return Err(format!("{}: \"flags\" is not an object", path.display()));
        };
        let flag = flags.entry(LOAD_FLAG).or_insert_with(|| {
            json!({
                "key": LOAD_FLAG, "on": true, "variations": [0, 1],
                "fallthrough": {"variation": 1}, "offVariation": 0,
            })
        });
        let Some(flag) = flag.as_object_mut() else {
            return Err(format!(
                "{}: flag {LOAD_FLAG} is not an object",
                path.display()
            ));
        };
        if served {
            flag.insert("variations".to_owned(), json!([0, PLACEHOLDER]));
            flag.insert("on".to_owned(), json!(true));
            flag.insert("fallthrough".to_owned(), json!({"variation": 1}));
            flag.remove("rules");
            flag.remove("targets");
            flag.remove("contextTargets");
            flag.remove("prerequisites");
            flag.insert(
                "clientSideAvailability".to_owned(),
                json!({"usingEnvironmentId": true, "usingMobileKey": true}),
            );
        } else {
            flag.insert("salt".to_owned(), json!(PLACEHOLDER));
        }
        let text = serde_json::to_vec(&data).map_err(|e| e.to_string())?;
        let quoted = format!("\"{PLACEHOLDER}\"");
        let at = memchr::memmem::find(&text, quoted.as_bytes())
            .ok_or_else(|| "the marker placeholder is missing".to_owned())?;
        let name = path
            .file_name()
            .map_or_else(|| "data".into(), |n| n.to_string_lossy().into_owned());
        Ok(Self {
            temp: path.with_file_name(format!(".{name}.sse-load-tmp")),
            path: path.to_owned(),
            before: text[..at + 1].to_vec(),
            after: text[at + quoted.len() - 1..].to_vec(),
        })
    }

    /// Size of the data file as written, in bytes.
    pub fn len(&self) -> usize {
        self.before.len() + self.after.len()
    }

    /// Replace the file with the data carrying `marker`.
    pub fn write(&self, marker: &str) -> io::Result<()> {
        let mut text = Vec::with_capacity(self.len() + marker.len());
        text.extend_from_slice(&self.before);
        text.extend_from_slice(marker.as_bytes());
        text.extend_from_slice(&self.after);
        fs::write(&self.temp, &text)?;
        fs::rename(&self.temp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<Duration> = (1..=200).rev().map(Duration::from_millis).collect();
        let p = Percentiles::of(&mut samples);
        assert_eq!(p.count, 200);
        assert_eq!(p.min, Duration::from_millis(1));
        assert_eq!(p.p50, Duration::from_millis(100));
        assert_eq!(p.p90, Duration::from_millis(180));
        assert_eq!(p.p99, Duration::from_millis(198));
        assert_eq!(p.max, Duration::from_millis(200));
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
        let one = Percentiles::of(&mut [Duration::from_millis(7)]);
        assert_eq!(
            (one.p50, one.p99),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = ProcSample::read(None).unwrap();
        assert!(sample.rss_kb > 0 && sample.hwm_kb >= sample.rss_kb);
        assert!(sample.threads >= 1 && !sample.is_zombie);
    }

    #[test]
    fn listen_overflows_are_counted() {
        assert!(listen_overflows().is_some());
    }

    #[test]
    fn trigger_keeps_other_flags_and_changes_only_the_salt() {
        let dir = std::env::temp_dir().join(format!("sse-load-trigger-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data.json");
        let other = json!({"key": "other", "on": false, "variations": [true, false]});
        fs::write(
            &path,
            json!({"flags": {"other": other}, "segments": {}}).to_string(),
        )
        .unwrap();
        let trigger = Trigger::load(&path, false).unwrap();
        trigger.write("sse-load-ab-3").unwrap();
        let data: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(data["flags"]["other"], other);
        assert_eq!(data["flags"][LOAD_FLAG]["salt"], "sse-load-ab-3");
        assert_eq!(data["flags"][LOAD_FLAG]["fallthrough"]["variation"], 1);
        assert_eq!(data["segments"], json!({}));
        trigger.write("sse-load-ab-4").unwrap();
        let data: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(data["flags"][LOAD_FLAG]["salt"], "sse-load-ab-4");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
