//! A worker stops when told to, whatever Redis is doing.

use super::*;

/// An idle worker whose Redis went away (it retries with backoff, nothing lost) drains on
/// SIGTERM at once and exits 0, instead of retrying forever.
#[test]
fn an_idle_worker_whose_redis_went_away_stops_on_sigterm() {
    let t = T::new();
    let Some(mut redis) = Redis::start(&t.path("redis")) else { return };
    t.write("script.yaml", "frame: []\n");
    t.write("root/agentloop.yaml", "max_steps: 8\n");
    let mut w = worker(&t, &redis, "w1", &[]);
    let logs = || w.log();
    wait_until("the worker to start", &logs, &mut || w.log().contains("worker w1 on"));
    redis.stop();
    wait_until("the worker to find Redis gone", &logs, &mut || w.log().contains("is unreachable"));
    let pid = rustix::process::Pid::from_child(&w.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let began = Instant::now();
    let status = loop {
        if let Some(s) = w.child.try_wait().unwrap() {
            break s;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "the worker ignored SIGTERM:\n{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{}", w.log());
    assert!(w.log().contains("drained"), "{}", w.log());
}
