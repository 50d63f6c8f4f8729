//! Redis over TLS against plaintext in the same run (issue 30 item 8): the init of a
//! 5,000-flag data set and point reads (`get`, one key after another on one
//! connection), each against a plaintext redis-server and a TLS-only one
//! (`--port 0 --tls-port`, certificates made for the run: the tests' `RedisServer::start_tls`), timed in turn,
//! round after round, so that load on a shared machine skews both alike.

use std::sync::Arc;

use flagsync::Kind;
use flagsync::persist::{Item, PersistentStore};
use flagsync_redis::RedisStore;

/// Time init and point reads over `plain` and over TLS, interleaved, and print the
/// medians and TLS throughput as a share of plaintext.
pub(crate) fn compare(
    rt: &tokio::runtime::Runtime,
    plain: Arc<RedisStore>,
    items: &[(Kind, String, Item)],
) {
    let server = super::redis_server::RedisServer::start_tls();
    let tls = Arc::new(server.store_builder().pool_size(1).build().unwrap());
    let rounds = super::bench_rounds();
    let keys = super::flag_keys(items);
    let init = |store: &Arc<RedisStore>| rt.block_on(store.init(items)).unwrap();
    let reads = |store: &Arc<RedisStore>| {
        rt.block_on(async {
            for key in &keys {
                assert!(store.get(Kind::Flag, key).await.unwrap().is_some());
            }
        })
    };
    // Connections opened and data written before timing.
    init(&plain);
    init(&tls);
    let named: [(&str, &dyn Fn()); 4] = [
        ("init plaintext", &|| init(&plain)),
        ("init TLS", &|| init(&tls)),
        ("1,000 point reads plaintext", &|| reads(&plain)),
        ("1,000 point reads TLS", &|| reads(&tls)),
    ];
    let times = super::time_rounds(&named, rounds);
    let bytes: usize = items.iter().map(|(_, _, i)| i.raw.len()).sum();
    let title = format!(
        "TLS against plaintext, {} items ({:.1} MB), {rounds} rounds",
        items.len(),
        bytes as f64 / 1e6
    );
    let medians = super::print_medians(&title, &named, &times);
    let share =
        |plain: usize, tls: usize| medians[plain].as_secs_f64() / medians[tls].as_secs_f64();
    eprintln!(
        "  init throughput, TLS / plaintext        {:.2}",
        share(0, 1)
    );
    eprintln!(
        "  point-read throughput, TLS / plaintext  {:.2}",
        share(2, 3)
    );
}
