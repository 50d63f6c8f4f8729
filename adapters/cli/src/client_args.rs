//! `serve`'s options for client-side (JavaScript) and mobile SDKs: the client-side ID
//! and mobile key that authorize them, secure mode, the origins browsers may call
//! from, and the goals served (`flagsync_server`'s client-side endpoints).

use std::path::PathBuf;

use clap::Args;
use flagsync_server::ServerBuilder;

use crate::error::CliError;

/// The help heading of these options.
const CLIENT: &str = "Client-side and mobile SDKs";

/// `serve`'s client-side and mobile options (each also from its FLAGSYNC_… variable).
#[derive(Debug, Args, Default)]
pub(crate) struct ClientArgs {
    /// Serve client-side (JavaScript) SDKs that name this client-side ID (environment
    /// ID): GET /sdk/evalx/ID/contexts/…, REPORT /sdk/evalx/ID/context, streams
    /// GET /eval/ID/…, REPORT /eval/ID, goals GET /sdk/goals/ID, events
    /// POST /events/bulk/ID [default: any ID].
    #[arg(long, value_name = "ID", env = "FLAGSYNC_CLIENT_SIDE_ID", help_heading = CLIENT)]
    pub(crate) client_side_id: Option<String>,
    /// Serve mobile SDKs whose Authorization carries this mobile key: GET
    /// /msdk/evalx/contexts/…, streams GET /meval/…, events POST /mobile/events/bulk
    /// [default: any key]. Set FLAGSYNC_MOBILE_KEY rather than the argument (`ps`
    /// shows arguments).
    #[arg(
        long,
        value_name = "KEY",
        env = "FLAGSYNC_MOBILE_KEY",
        hide_env_values = true,
        help_heading = CLIENT
    )]
    pub(crate) mobile_key: Option<String>,
    /// Require secure mode of client-side SDKs: each request carries h, the
    /// HMAC-SHA256 of its context's key with --sdk-key; without it or wrong: 400.
    #[arg(long, env = "FLAGSYNC_SECURE_MODE", help_heading = CLIENT)]
    pub(crate) secure_mode: bool,
    /// Allow browsers on ORIGIN (e.g. https://app.example) to call the client-side
    /// endpoints (CORS); repeatable, or comma-separated in FLAGSYNC_ALLOWED_ORIGIN
    /// [default: any origin].
    #[arg(long, value_name = "ORIGIN", env = "FLAGSYNC_ALLOWED_ORIGIN", value_delimiter = ',', help_heading = CLIENT)]
    pub(crate) allowed_origin: Vec<String>,
    /// Serve this JSON file's goals at GET /sdk/goals/ID [default: []].
    #[arg(long, value_name = "FILE", env = "FLAGSYNC_GOALS", help_heading = CLIENT, conflicts_with = "upstream")]
    pub(crate) goals: Option<PathBuf>,
    /// With --upstream: fetch goals from this client-side service (GET
    /// URI/sdk/goals/ID) [default: https://clientsdk.launchdarkly.com].
    #[arg(long, value_name = "URI", env = "FLAGSYNC_UPSTREAM_CLIENT_SIDE", requires = "upstream", help_heading = CLIENT)]
    pub(crate) upstream_client_side: Option<String>,
}

impl ClientArgs {
    /// The relay file's fields for the default environment (`envId`, `mobileKey`,
    /// `secureMode`, `allowedOrigin`), added to `env`.
    pub(crate) fn relay_fields(&self, env: &mut serde_json::Value) {
        if let Some(id) = &self.client_side_id {
            env["envId"] = id.clone().into();
        }
        if let Some(key) = &self.mobile_key {
            env["mobileKey"] = key.clone().into();
        }
        if self.secure_mode {
            env["secureMode"] = true.into();
        }
        if !self.allowed_origin.is_empty() {
            env["allowedOrigin"] = self.allowed_origin.clone().into();
        }
    }

    /// `builder` with these settings for its default environment. `--secure-mode`
    /// needs the SDK key its hashes are made with (`has_sdk_key`).
    pub(crate) fn apply(
        &self,
        mut builder: ServerBuilder,
        has_sdk_key: bool,
    ) -> Result<ServerBuilder, CliError> {
        if self.secure_mode && !has_sdk_key {
            return Err(CliError::usage(
                "--secure-mode needs --sdk-key (the hashes are made with the SDK key)",
            ));
        }
        builder = builder
            .client_side_id(self.client_side_id.clone())
            .mobile_key(self.mobile_key.clone())
            .secure_mode(self.secure_mode);
        for origin in &self.allowed_origin {
            builder = builder.allowed_origin(origin.clone());
        }
        if let Some(path) = &self.goals {
            let bytes = std::fs::read(path).map_err(|e| {
                CliError::usage(format!("cannot read --goals {}: {e}", path.display()))
            })?;
            if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
                return Err(CliError::usage(format!(
                    "--goals {}: not JSON",
                    path.display()
                )));
            }
            builder = builder.goals(bytes.into());
        }
        Ok(builder)
    }
}
