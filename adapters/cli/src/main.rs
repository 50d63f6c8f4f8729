//! `flagsync`: serve flags locally, watch a flag delivery service, take a snapshot,
//! evaluate a data file's flags.
//!
//! One file per command (`serve.rs`, `demo.rs`, `watch.rs`, `snapshot.rs`, `eval.rs`); `args.rs`
//! holds clap's definitions, `options.rs` turns the connection arguments into the
//! client's options, `printer.rs` prints what a client sees, `redis_args.rs` the Redis options (one
//! server, Sentinel, Cluster), `client.rs` is the
//! CLI's view of a client, `events.rs` the `serve --events` log; `relay.rs` is
//! `serve`'s relay mode (the `flagsync-relay` crate's relay, started with the command
//! line's settings).

mod args;
mod client;
mod client_args;
mod demo;
mod error;
mod eval;
mod events;
mod logs;
mod network;
mod options;
mod printer;
mod redis_args;
mod relay;
mod serve;
mod snapshot;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use args::{Cli, Command};
use demo::demo;
use eval::eval;
use serve::serve;
use snapshot::snapshot;
use watch::watch;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flagsync: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(*args).await,
            Command::Demo(args) => demo(args).await,
            Command::Watch(args) => watch(args).await,
            Command::Snapshot(args) => snapshot(args).await,
            Command::Eval(args) => eval(&args),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flagsync: error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
