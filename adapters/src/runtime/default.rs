//! Picking the runtime when the application gave none.

use std::sync::Arc;

#[cfg(all(feature = "async-std", not(feature = "smol")))]
use super::AsyncStdRuntime;
use super::Runtime;
#[cfg(feature = "smol")]
use super::SmolRuntime;
#[cfg(feature = "tokio")]
use super::TokioRuntime;

/// The runtime to use when none was given: tokio if called inside a tokio runtime, else
/// smol, else async-std (whichever features are enabled).
pub(crate) fn default_runtime() -> Option<Arc<dyn Runtime>> {
    #[cfg(feature = "tokio")]
    if let Some(rt) = TokioRuntime::try_current() {
        return Some(Arc::new(rt));
    }
    #[cfg(feature = "smol")]
    return Some(Arc::new(SmolRuntime));
    #[cfg(all(feature = "async-std", not(feature = "smol")))]
    return Some(Arc::new(AsyncStdRuntime));
    #[allow(unreachable_code)]
    None
}
