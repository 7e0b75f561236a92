//! `make bench` (part 2): what MCP servers cost the loop.
//!
//! - listing tools from the cache (what `plan` does on every step): target < 5 ms;
//! - a cold start (start, initialize, list, stop) of the test server, and of each real
//!   reference server when the harness is installed (`../shared/harness/install.sh`).
//!
//! Prints a report and exits non-zero when the cache target is missed. Needs python3 (the
//! test server); without it the bench says so and exits 0.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used
)]

use agentloop_config::config::Config;
use agentloop_tools::mcp::config::ServerConfig;
use agentloop_tools::mcp::{Hub, Source};
use camino::Utf8PathBuf;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        println!("mcp bench skipped: python3 is needed for the test server");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap();
    // A private cache folder, so the bench never touches the user's.
    std::env::set_var("XDG_CACHE_HOME", root.join("cache"));
    let fake = format!("{}/tests/mcp/fake_server.py", env!("CARGO_MANIFEST_DIR"));
    let mut cfg = Config::default();
    cfg.mcp.servers.insert(
        "fake".into(),
        ServerConfig { command: Some("python3".into()), args: Some(vec![fake]), ..Default::default() },
    );
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();

    let mut cold = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let hub = Hub::load(&cfg, &ws, Source::Servers).unwrap();
        cold.push(t.elapsed());
        assert!(hub.warnings.iter().all(|w| w.contains("bad_schema")), "{:?}", hub.warnings);
    }
    let mut cached = Vec::new();
    let mut tools = 0;
    for _ in 0..200 {
        let t = Instant::now();
        let hub = Hub::load(&cfg, &ws, Source::CacheFirst).unwrap();
        cached.push(t.elapsed());
        tools = hub.specs().len();
    }
    let cache_ms = median(cached.clone());
    println!("MCP tool listing (test server, {tools} tools)");
    println!("  from the cache: median {}, worst {} (target < 5 ms)", ms(cache_ms), ms(*cached.iter().max().unwrap()));
    println!("  cold start (start, initialize, list, stop): median {}", ms(median(cold)));

    // The real reference servers, when installed.
    let harness = std::env::var("HARNESS_DIR")
        .unwrap_or_else(|_| format!("{}/.cache/agentloop-harness", std::env::var("HOME").unwrap_or_default()));
    let file = format!("{harness}/mcp-servers.json");
    if std::path::Path::new(&file).is_file() {
        std::env::set_var("HARNESS_DIR", &harness);
        let mut real = Config::default();
        real.mcp.config_file = Some(file.into());
        std::fs::create_dir_all(root.join("sandbox")).unwrap();
        real.mcp.servers.insert(
            "filesystem".into(),
            ServerConfig { args: Some(vec![root.join("sandbox").to_string()]), ..Default::default() },
        );
        println!("Real reference servers ({harness})");
        let t = Instant::now();
        let hub = Hub::load(&real, &ws, Source::Servers).unwrap();
        let all = t.elapsed();
        for st in &hub.states {
            match &st.listing {
                Some(l) => println!(
                    "  {:<11} cold start {:>5} ms, {:>2} tools, protocol {}",
                    st.server.name,
                    l.startup_ms,
                    st.tools.len(),
                    l.protocol_version
                ),
                None => println!("  {:<11} {:?}", st.server.name, st.status),
            }
        }
        println!("  all five started at once: {}", ms(all));
        let mut cached = Vec::new();
        let mut n = 0;
        for _ in 0..100 {
            let t = Instant::now();
            let hub = Hub::load(&real, &ws, Source::CacheFirst).unwrap();
            cached.push(t.elapsed());
            n = hub.specs().len();
        }
        println!("  from the cache ({n} tools): median {}", ms(median(cached)));
    } else {
        println!("(real servers not installed: ../shared/harness/install.sh adds them to this report)");
    }
    if cache_ms >= Duration::from_millis(5) {
        eprintln!("MISSED: listing tools from the cache took {} (target < 5 ms)", ms(cache_ms));
        std::process::exit(1);
    }
}
