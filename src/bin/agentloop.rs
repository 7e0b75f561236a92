//! The agentloop binary: parse, run, exit. All logic lives in the library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(agentloop::main())
}
