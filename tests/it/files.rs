//! The file tools on real files: paging a long log by lines, following the notes that say which
//! call reads on, grep, where file_write may write, and that no message names a machine path.

use crate::common::*;
use crate::tools::call;
use serde_json::{json, Value};

/// A 4,000-line log with one error deep inside it, at line 3,217.
fn log_ws() -> (T, String) {
    let t = T::new();
    let mut log = String::new();
    for i in 1..=4000 {
        if i == 3217 {
            log.push_str("3217 ERROR disk full on /dev/sda1\n");
        } else {
            log.push_str(&format!("{i} INFO request served in {} ms\n", i % 97));
        }
    }
    t.write("ws/logs/app.log", &log);
    (t, log)
}

/// The JSON arguments of the `read on with file_read {...}` call in a note, verbatim.
fn read_on(output: &str) -> Option<String> {
    let key = "read on with file_read ";
    let rest = &output[output.rfind(key)? + key.len()..];
    Some(rest[..rest.rfind(']')?].to_string())
}

/// Runs `tools call file_read` with the arguments exactly as a note gave them.
fn file_read_raw(t: &T, args: &str) -> Value {
    let out = t.al(&["tools", "call", "file_read", "--args", args]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A file_read output without its closing note.
fn body(output: &str) -> &str {
    match output.rfind("\n[line") {
        Some(i) => &output[..i + 1],
        None => output,
    }
}

#[test]
fn a_deep_line_is_read_by_offset_and_limit() {
    let (t, _) = log_ws();
    let (code, v) = call(&t, "file_read", json!({"path": "logs/app.log", "offset": 3217, "limit": 1}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        v["output"],
        "3217 ERROR disk full on /dev/sda1\n[line 3217 of 4000 in logs/app.log; read on with file_read {\"path\": \"logs/app.log\", \"offset\": 3218, \"limit\": 1}]"
    );
    assert_eq!(v["metadata"]["total_lines"], 4000);
    assert_eq!(v["metadata"]["path"], "logs/app.log");
    let (code, v) = call(&t, "file_read", json!({"path": "logs/app.log", "offset": 3999}));
    assert_eq!(code, Some(0));
    assert_eq!(
        v["output"],
        "3999 INFO request served in 22 ms\n4000 INFO request served in 23 ms\n[lines 3999-4000 of 4000 in logs/app.log; end of file]"
    );
}

#[test]
fn following_the_notes_reads_the_whole_file_exactly_once() {
    let (t, log) = log_ws();
    let mut v = file_read_raw(&t, r#"{"path": "logs/app.log"}"#);
    let mut read = String::new();
    let mut calls = 1;
    loop {
        let out = v["output"].as_str().unwrap();
        assert!(out.chars().count() <= 8000, "every page fits the output cap");
        assert!(v["artifacts"].as_array().unwrap().is_empty(), "file_read never spills a copy");
        read.push_str(body(out));
        match read_on(out) {
            Some(args) => {
                v = file_read_raw(&t, &args);
                calls += 1;
            }
            None => {
                assert!(out.ends_with("; end of file]"), "{out}");
                break;
            }
        }
    }
    assert_eq!(read, log);
    assert!(calls > 10, "the log takes several pages ({calls})");
}

#[test]
fn offsets_past_the_end_and_below_one_are_refused() {
    let (t, _) = log_ws();
    let (code, v) = call(&t, "file_read", json!({"path": "logs/app.log", "offset": 5000}));
    assert_eq!(code, Some(6));
    assert_eq!(v["error"], "argument `offset`: 5000 is past the end of logs/app.log, which has 4000 lines");
    let out =
        t.al(&["tools", "call", "file_read", "--args", r#"{"path": "logs/app.log", "offset": 0}"#]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("argument `offset`"), "{}", stderr(&out));
    let out =
        t.al(&["tools", "call", "file_read", "--args", r#"{"path": "logs/app.log", "limit": 0}"#]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let (code, v) = call(&t, "file_read", json!({"path": "logs/app.log", "offset": 1, "limit": 3}));
    assert_eq!(code, Some(0));
    assert!(v["output"].as_str().unwrap().ends_with(
        "[lines 1-3 of 4000 in logs/app.log; read on with file_read {\"path\": \"logs/app.log\", \"offset\": 4, \"limit\": 3}]"
    ));
}

/// A web page longer than the output cap spills to artifacts/, and the note's call pages
/// through the artifact to its end.
#[test]
fn a_spill_note_names_the_call_that_reads_on() {
    let t = T::new();
    let page: String = (1..=1500).map(|i| format!("paragraph {i} of the page\n")).collect();
    let s = Server::start(vec![Reply::text(200, "text/plain", &page)]);
    t.write("ws/agentloop.yaml", "tools:\n  http:\n    allow_private: true\n");
    let (code, v) = call(&t, "web_fetch", json!({"url": format!("{}/long", s.url), "max_length": 100000}));
    assert_eq!(code, Some(0), "{v}");
    let out = v["output"].as_str().unwrap();
    let art = v["artifacts"][0].as_str().unwrap();
    assert!(art.starts_with("artifacts/tool-web_fetch-"), "{art}");
    assert_eq!(t.read(&format!("ws/{art}")), page);
    let i = out.rfind("\n[output truncated").expect("a note");
    let mut read = out[..i].to_string();
    assert!(out[i..].contains(&format!("{} characters, 1500 lines in total", page.len())), "{out}");
    let mut args = read_on(out).expect("the note names the call");
    assert!(args.starts_with(&format!("{{\"path\": \"{art}\", \"offset\": ")), "{args}");
    loop {
        let v = file_read_raw(&t, &args);
        let out = v["output"].as_str().unwrap();
        read.push_str(body(out));
        match read_on(out) {
            Some(a) => args = a,
            None => break,
        }
    }
    assert_eq!(read, page);
    // A page cut at max_length says so.
    let (_, v) = call(&t, "web_fetch", json!({"url": format!("{}/long", s.url), "max_length": 50}));
    assert!(v["output"].as_str().unwrap().contains("[page cut at 50 of"), "{v}");
}

fn grep_ws() -> T {
    let (t, _) = log_ws();
    t.write("ws/logs/other.txt", "nothing here\nERROR in a text file\n");
    t.write("ws/src/main.rs", "fn main() {\n    // an error, lowercase\n}\n");
    t.write("ws/.git/config", "ERROR in git internals\n");
    t.write("ws/data.bin", "ERROR\0binary\n");
    t.write("secret/leak.txt", "ERROR secret outside\n");
    std::os::unix::fs::symlink(t.path("secret"), t.path("ws/outlink")).unwrap();
    std::os::unix::fs::symlink(t.path("secret/leak.txt"), t.path("ws/logs/leak.log")).unwrap();
    t
}

#[test]
fn grep_answers_path_line_text() {
    let t = grep_ws();
    let (code, v) = call(&t, "grep", json!({"pattern": "ERROR disk"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        v["output"],
        "logs/app.log:3217:3217 ERROR disk full on /dev/sda1\n\n[1 match in 1 file (3 files searched)]"
    );
    // Symlinks are not followed, .git and binary files are skipped.
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR"}));
    assert_eq!(
        v["output"],
        "logs/app.log:3217:3217 ERROR disk full on /dev/sda1\nlogs/other.txt:2:ERROR in a text file\n\n[2 matches in 2 files (3 files searched)]"
    );
    let (_, v) = call(&t, "grep", json!({"pattern": "error", "case_insensitive": true, "glob": "*.rs"}));
    assert_eq!(v["output"], "src/main.rs:2:    // an error, lowercase\n\n[1 match in 1 file (1 file searched)]");
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR", "path": "logs", "glob": "*.txt"}));
    assert_eq!(v["output"], "logs/other.txt:2:ERROR in a text file\n\n[1 match in 1 file (1 file searched)]");
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR", "path": "logs/app.log", "context": 1}));
    assert_eq!(
        v["output"],
        "logs/app.log-3216-3216 INFO request served in 15 ms\nlogs/app.log:3217:3217 ERROR disk full on /dev/sda1\nlogs/app.log-3218-3218 INFO request served in 17 ms\n\n[1 match in 1 file (1 file searched)]"
    );
    let (_, v) = call(&t, "grep", json!({"pattern": "^1[0-9] INFO", "max_matches": 3}));
    assert_eq!(
        v["output"],
        "logs/app.log:10:10 INFO request served in 10 ms\nlogs/app.log:11:11 INFO request served in 11 ms\nlogs/app.log:12:12 INFO request served in 12 ms\n\n[stopped at 3 matches (max_matches); there are more: narrow `path`, `glob` or `pattern`, or raise max_matches (up to 500)]"
    );
    assert_eq!(v["metadata"]["truncated"], true);
    let (_, v) = call(&t, "grep", json!({"pattern": "no such text"}));
    assert_eq!(v["output"], "[no matches for `no such text` in . (3 files searched)]");
    // The paper trail quotes earlier results: searched only when named.
    t.write("ws/trace.jsonl", "{\"result_summary\": \"3217 ERROR disk full\"}\n");
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR disk"}));
    assert_eq!(v["metadata"]["matches"], 1, "{v}");
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR disk", "path": "trace.jsonl"}));
    assert_eq!(
        v["output"],
        "trace.jsonl:1:{\"result_summary\": \"3217 ERROR disk full\"}\n\n[1 match in 1 file (1 file searched)]"
    );
}

#[test]
fn grep_is_confined_and_checks_its_arguments() {
    let t = grep_ws();
    for path in ["..", "../secret", "outlink", "/etc", "logs/../../secret"] {
        let (code, v) = call(&t, "grep", json!({"pattern": "ERROR", "path": path}));
        assert_eq!(code, Some(6), "{path}: {v}");
        assert!(!v.to_string().contains("secret outside"), "{path}: {v}");
    }
    let (code, v) = call(&t, "grep", json!({"pattern": "(unclosed"}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().starts_with("argument `pattern`: not a valid regular expression"), "{v}");
    let (code, v) = call(&t, "grep", json!({"pattern": "x", "glob": "[z-a]"}));
    assert_eq!(code, Some(6));
    assert!(v["error"].as_str().unwrap().starts_with("argument `glob`"), "{v}");
    for bad in [json!({"pattern": "x", "context": 11}), json!({"pattern": "x", "max_matches": 0}), json!({})] {
        let out = t.al(&["tools", "call", "grep", "--args", &bad.to_string()]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
    // Files over tools.max_file_bytes are skipped and counted.
    t.write("ws/agentloop.yaml", "tools:\n  max_file_bytes: 100000\n");
    let (_, v) = call(&t, "grep", json!({"pattern": "ERROR", "path": "logs"}));
    assert_eq!(
        v["output"],
        "logs/other.txt:2:ERROR in a text file\n\n[1 match in 1 file (1 file searched); 1 file over tools.max_file_bytes skipped]"
    );
}

#[test]
fn file_write_writes_anywhere_in_the_workspace_but_the_paper_trail() {
    let t = T::new();
    t.write("ws/memory.md", "# Memory\n");
    let (code, v) = call(&t, "file_write", json!({"path": "answer.txt", "content": "42\n"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["output"], "wrote 3 characters to answer.txt");
    assert_eq!(v["artifacts"], json!(["answer.txt"]));
    assert_eq!(t.read("ws/answer.txt"), "42\n");
    let (code, _) = call(&t, "file_write", json!({"path": "notes/day/1.md", "content": "x"}));
    assert_eq!(code, Some(0));
    std::os::unix::fs::symlink(".", t.path("ws/here")).unwrap();
    std::os::unix::fs::symlink("notes", t.path("ws/notes_link")).unwrap();
    for (path, why) in [
        ("memory.md", "`memory.md` is part of the run's paper trail"),
        ("./trace.jsonl", "`trace.jsonl` is part of the run's paper trail"),
        ("state.json", "`state.json` is part of the run's paper trail"),
        ("notes/../result.json", "`result.json` is part of the run's paper trail"),
        ("context.md", "paper trail"),
        ("plan.md", "paper trail"),
        ("decisions.md", "paper trail"),
        ("skills.md", "paper trail"),
        ("agentloop.yaml", "agentloop configuration"),
        ("agents/x.yaml", "agent profiles"),
        ("templates/prompt-plan.j2", "prompt templates"),
        ("runs/r1/state.json", "event-mode runs"),
        (".agentloop.lock", "belong to agentloop"),
        ("notes/.agentloop.journal.json", "belong to agentloop"),
        (".git/hooks/pre-commit", ".git"),
        ("here/memory.md", "`memory.md` is part of the run's paper trail"),
        ("notes_link/2.md", "`notes_link` is a symbolic link"),
    ] {
        let (code, v) = call(&t, "file_write", json!({"path": path, "content": "pwned", "mode": "overwrite"}));
        assert_eq!(code, Some(6), "{path}: {v}");
        let e = v["error"].as_str().unwrap();
        assert!(e.starts_with("access denied") && e.contains(why), "{path}: {e}");
        let (code, _) = call(&t, "file_write", json!({"path": path, "content": "pwned", "mode": "append"}));
        assert_eq!(code, Some(6), "append {path}");
    }
    assert_eq!(t.read("ws/memory.md"), "# Memory\n");
    for f in ["trace.jsonl", "state.json", "agentloop.yaml", "agents", "templates", "runs", ".git", ".agentloop.lock"] {
        assert!(!t.exists(&format!("ws/{f}")), "{f} was created");
    }
}

#[test]
fn write_paths_narrows_where_file_write_writes() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "tools:\n  write_paths: [artifacts]\n");
    std::fs::create_dir_all(t.path("ws/artifacts")).unwrap();
    let (code, v) = call(&t, "file_write", json!({"path": "answer.txt", "content": "x"}));
    assert_eq!(code, Some(6));
    assert_eq!(
        v["error"],
        "access denied: `answer.txt` is outside the folders this tool may write (artifacts); give a path relative to the workspace"
    );
    let (code, v) = call(&t, "file_write", json!({"path": "artifacts/a.md", "content": "x"}));
    assert_eq!((code, v["output"].as_str().unwrap()), (Some(0), "wrote 1 characters to artifacts/a.md"));
    // Naming the workspace itself still keeps the paper trail out of reach.
    t.write("ws/agentloop.yaml", "tools:\n  write_paths: [., ../out]\n");
    std::fs::create_dir_all(t.path("out")).unwrap();
    let (code, _) = call(&t, "file_write", json!({"path": "answer.txt", "content": "x"}));
    assert_eq!(code, Some(0));
    let (code, v) = call(&t, "file_write", json!({"path": "../out/o.txt", "content": "o"}));
    assert_eq!((code, v["output"].as_str().unwrap()), (Some(0), "wrote 1 characters to ../out/o.txt"));
    let (code, _) = call(&t, "file_write", json!({"path": "memory.md", "content": "x"}));
    assert_eq!(code, Some(6));
}

/// What reaches the model names workspace-relative paths, never the machine's.
#[test]
fn no_message_names_a_machine_path() {
    let t = grep_ws();
    t.write("data/in.txt", "data\n");
    t.write("ws/agentloop.yaml", "tools:\n  read_paths: [../data]\n");
    let root = t.root().to_str().unwrap().to_string();
    let real = t.root().canonicalize().unwrap().to_str().unwrap().to_string();
    let calls = [
        ("file_read", json!({"path": "../secret/leak.txt"})),
        ("file_read", json!({"path": format!("{root}/secret/leak.txt")})),
        ("file_read", json!({"path": format!("{real}/ws/logs/app.log"), "limit": 1})),
        ("file_read", json!({"path": "missing.txt"})),
        ("file_read", json!({"path": "logs"})),
        ("file_read", json!({"path": "outlink/leak.txt"})),
        ("file_read", json!({"path": "../data/in.txt"})),
        ("list_dir", json!({"path": "nope"})),
        ("list_dir", json!({"path": ".."})),
        ("grep", json!({"pattern": "x", "path": "../secret"})),
        ("grep", json!({"pattern": "data", "path": "../data"})),
        ("file_write", json!({"path": "../x.txt", "content": "x"})),
        ("file_write", json!({"path": format!("{root}/x.txt"), "content": "x"})),
        ("file_write", json!({"path": "memory.md", "content": "x"})),
        ("file_write", json!({"path": "outlink/x.txt", "content": "x"})),
        ("file_write", json!({"path": "logs/app.log/x", "content": "x"})),
        ("finish", json!({"summary": "s", "artifacts": ["../secret/leak.txt"]})),
        ("finish", json!({"summary": "s", "artifacts": [format!("{root}/secret/leak.txt")]})),
    ];
    for (tool, args) in calls {
        let out = t.al(&["tools", "call", tool, "--args", &args.to_string()]).output().unwrap();
        let text = stdout(&out);
        assert!(!text.contains(&root) && !text.contains(&real), "{tool} {args} names a machine path: {text}");
    }
    let (_, v) = call(&t, "file_read", json!({"path": format!("{real}/ws/logs/app.log"), "limit": 1}));
    assert!(v["output"].as_str().unwrap().contains("in logs/app.log;"), "{v}");
    let (_, v) = call(&t, "file_read", json!({"path": "../data/in.txt"}));
    assert_eq!(v["metadata"]["path"], "../data/in.txt");
    // The catalog the Plan prompt shows names skill folders from the workspace too.
    t.write("ws/skills/local/SKILL.md", "---\nname: local\ndescription: A local skill.\n---\nBody.\n");
    let out = t.cmd().arg("-w").arg(t.path("ws")).args(["skills", "gen"]).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("- location: skills/local\n") && !text.contains(&root), "{text}");
}

#[test]
fn file_read_reads_latin_1_and_utf_16_when_told() {
    let t = T::new();
    t.write("ws/.keep", "");
    std::fs::write(t.path("ws/latin.txt"), b"caf\xe9\nna\xefve\n").unwrap();
    let mut le = vec![0xFF, 0xFE];
    le.extend("héllo\nwörld\n".encode_utf16().flat_map(u16::to_le_bytes));
    std::fs::write(t.path("ws/le.txt"), &le).unwrap();
    let be: Vec<u8> = "größe\n".encode_utf16().flat_map(u16::to_be_bytes).collect();
    std::fs::write(t.path("ws/be.txt"), &be).unwrap();
    // UTF-8 is the default; a file that is not says which encodings there are.
    let (code, v) = call(&t, "file_read", json!({"path": "latin.txt"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("\"encoding\": \"latin-1\""), "{v}");
    let (_, v) = call(&t, "file_read", json!({"path": "latin.txt", "encoding": "latin-1"}));
    assert_eq!(v["output"], "café\nnaïve\n");
    assert_eq!(v["metadata"]["encoding"], "latin-1");
    let (_, v) = call(&t, "file_read", json!({"path": "le.txt", "encoding": "utf-16"}));
    assert_eq!(v["output"], "héllo\nwörld\n", "the byte order mark picks little-endian and is not shown");
    let (_, v) = call(&t, "file_read", json!({"path": "be.txt", "encoding": "utf-16be"}));
    assert_eq!(v["output"], "größe\n");
    let (_, v) = call(&t, "file_read", json!({"path": "le.txt", "encoding": "utf-16le", "offset": 2}));
    assert_eq!(body(v["output"].as_str().unwrap()), "wörld\n");
    // A partial read's note reads on the same way.
    let (_, v) = call(&t, "file_read", json!({"path": "latin.txt", "encoding": "latin-1", "limit": 1}));
    let next = read_on(v["output"].as_str().unwrap()).unwrap();
    assert_eq!(file_read_raw(&t, &next)["output"].as_str().map(body), Some("naïve\n"));
    // A name it does not know is refused, naming the ones it does.
    let out = t
        .al(&["tools", "call", "file_read", "--args", r#"{"path": "latin.txt", "encoding": "ebcdic"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains("encoding") && err.contains("latin-1") && err.contains("utf-16be"), "{err}");
}

#[test]
fn file_write_writes_latin_1_and_utf_16_when_told_and_file_read_reads_them_back() {
    let t = T::new();
    t.write("ws/.keep", "");
    let (code, v) = call(&t, "file_write", json!({"path": "latin.txt", "content": "café\n", "encoding": "latin-1"}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(std::fs::read(t.path("ws/latin.txt")).unwrap(), b"caf\xe9\n");
    assert_eq!((v["metadata"]["size_bytes"].as_u64(), v["metadata"]["encoding"].as_str()), (Some(5), Some("latin-1")));
    // Appending continues in the same bytes.
    call(&t, "file_write", json!({"path": "latin.txt", "content": "naïve\n", "encoding": "latin-1", "mode": "append"}));
    assert_eq!(std::fs::read(t.path("ws/latin.txt")).unwrap(), b"caf\xe9\nna\xefve\n");
    // utf-16 opens with its byte order mark (once, appends add none); utf-16be has none.
    call(&t, "file_write", json!({"path": "le.txt", "content": "héllo\n", "encoding": "utf-16"}));
    call(&t, "file_write", json!({"path": "le.txt", "content": "wörld\n", "encoding": "utf-16", "mode": "append"}));
    let mut le = vec![0xFF, 0xFE];
    le.extend("héllo\nwörld\n".encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(std::fs::read(t.path("ws/le.txt")).unwrap(), le);
    call(&t, "file_write", json!({"path": "be.txt", "content": "größe\n", "encoding": "utf-16be"}));
    let be: Vec<u8> = "größe\n".encode_utf16().flat_map(u16::to_be_bytes).collect();
    assert_eq!(std::fs::read(t.path("ws/be.txt")).unwrap(), be);
    // file_read reads each back with the same name.
    for (path, enc, text) in [
        ("latin.txt", "latin-1", "café\nnaïve\n"),
        ("le.txt", "utf-16", "héllo\nwörld\n"),
        ("be.txt", "utf-16be", "größe\n"),
    ] {
        let (_, v) = call(&t, "file_read", json!({"path": path, "encoding": enc}));
        assert_eq!(v["output"], text, "{path}");
    }
    // Text latin-1 cannot hold is refused, naming the character, and the file is unchanged.
    let (code, v) = call(&t, "file_write", json!({"path": "latin.txt", "content": "a → b", "encoding": "latin-1"}));
    assert_eq!(code, Some(6), "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("U+2192") && e.contains("character 3") && e.contains("\"encoding\": \"utf-8\""), "{e}");
    assert_eq!(std::fs::read(t.path("ws/latin.txt")).unwrap(), b"caf\xe9\nna\xefve\n");
    // A name it does not know is refused as file_read refuses it.
    let out = t
        .al(&["tools", "call", "file_write", "--args", r#"{"path": "x.txt", "content": "x", "encoding": "ebcdic"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains("encoding") && err.contains("latin-1") && err.contains("utf-16be"), "{err}");
    assert!(!t.exists("ws/x.txt"));
}
