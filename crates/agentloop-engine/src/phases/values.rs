//! The values part of negotiation: before a task is accepted, its goal and context are checked
//! against the agent's `values:`. A value lists the words or phrases (`refuse_if`) that mark a
//! task in conflict with it; the first phrase found declines the task, naming the value, the
//! phrase and where it was found.
//!
//! The match is deterministic and the user's own — no model is asked — so it costs nothing,
//! gives the same answer every time and can be tested: the text and the phrase are both reduced
//! to their words (letters and digits, lower-cased), and a phrase matches where its words stand
//! together, whole, in the text ("fake review" matches "Write a FAKE review!" but not "fake
//! reviewers"); a word ending in `*` matches any word it begins ("fake review*" matches both).

use agentloop_config::config::AgentValue;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A task in conflict with a value: which value, the phrase found and where (or, judged by the
/// model, its reason).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Conflict {
    pub value: String,
    pub phrase: String,
    /// The words of the task it matched, lower-cased.
    pub matched: String,
    /// `goal`, `context`, or `task` (judged by the model).
    pub found_in: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The model's reason, when the model judged the conflict (`values_check: model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<String>,
}

impl Conflict {
    /// The reason a declined task is given, in one sentence.
    pub fn reason(&self) -> String {
        let why = self.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        match &self.judged {
            Some(reason) => format!(
                "the task conflicts with the agent's value `{}`{why}, as the model judged it: {reason}",
                self.value
            ),
            None => format!(
                "the task conflicts with the agent's value `{}`{why}: its {} names \"{}\" (refuse_if \"{}\")",
                self.value, self.found_in, self.matched, self.phrase
            ),
        }
    }
}

/// The values part of the negotiation: the values checked, the conflict found, if any, and the
/// model's verdict when it was asked (`values_check: model`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    pub checked: Vec<String>,
    pub conflict: Option<Conflict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<Verdict>,
}

/// The model's verdict on a task against the agent's values (one small forced call).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// true when doing the task would go against one of the values
    pub conflict: bool,
    /// The name of the value it goes against (null when there is no conflict)
    #[serde(default)]
    pub value: Option<String>,
    /// Why, in one sentence
    #[schemars(length(min = 1, max = 300))]
    pub reason: String,
}

/// [`check`], then — with `values_check: model`, values to check and no phrase matched — the
/// model's judgement (one forced call, phase `values`; script phase `values`). A verdict naming
/// a value that is not one of the agent's is read as no conflict, and said so in its reason.
pub fn check_with(
    cfg: &agentloop_config::config::Config,
    root: &camino::Utf8Path,
    goal: &str,
    context: &str,
) -> agentloop_types::error::Result<Check> {
    let mut c = check(&cfg.values, goal, context);
    if c.conflict.is_some() || cfg.values.is_empty() || cfg.values_check != agentloop_config::config::ValuesCheck::Model
    {
        return Ok(c);
    }
    let mut v = judge(cfg, root, goal, context)?;
    let named = v.value.as_deref().and_then(|n| cfg.values.iter().find(|x| x.name == n));
    match named {
        Some(value) if v.conflict => {
            c.conflict = Some(Conflict {
                value: value.name.clone(),
                phrase: String::new(),
                matched: String::new(),
                found_in: "task",
                description: value.description.clone(),
                judged: Some(v.reason.clone()),
            });
        }
        None if v.conflict => {
            v.reason = format!("{} (it named no value of the agent's, so the task is taken)", v.reason);
            v.conflict = false;
        }
        _ => {}
    }
    c.judged = Some(v);
    Ok(c)
}

/// One forced call: does the task go against any of the agent's values?
fn judge(
    cfg: &agentloop_config::config::Config,
    root: &camino::Utf8Path,
    goal: &str,
    context: &str,
) -> agentloop_types::error::Result<Verdict> {
    let mut m = agentloop_model::model::from_config(cfg, root)?;
    let tool = crate::contract::answer_tool(
        "values_answer",
        "Record whether the task goes against one of the agent's values.",
        crate::contract::schema_of::<Verdict>(),
    );
    let values: Vec<String> = cfg
        .values
        .iter()
        .map(|v| match &v.description {
            Some(d) => format!("- {}: {d} (refuses tasks such as: {})", v.name, v.refuse_if.join("; ")),
            None => format!("- {} (refuses tasks such as: {})", v.name, v.refuse_if.join("; ")),
        })
        .collect();
    let prompt = format!(
        "The agent holds these values:\n{}\n\nThe task it is asked to take:\nGoal: {goal}\n{}\nWould doing this task go against one of the values? Judge what the task would do, not the words it uses.",
        values.join("\n"),
        if context.trim().is_empty() { String::new() } else { format!("Context: {context}\n") }
    );
    let system = "You check tasks against an agent's values before it takes them. Answer only by calling the tool.";
    let req = agentloop_model::model::Request::forced("values", system, prompt, &tool, 256, cfg);
    let r = m.complete(&req, &mut |_| {})?;
    crate::contract::forced_answer(r, &tool)
}

/// The words of `text`: runs of letters and digits, lower-cased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect()
}

/// One word of a `refuse_if` phrase: whole, or (written with a trailing `*`) any word it begins.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    pub text: String,
    pub prefix: bool,
}

/// A phrase's words; empty when it has no letters or digits (it could never match).
pub fn pattern(phrase: &str) -> Vec<Word> {
    phrase
        .split(|c: char| !c.is_alphanumeric() && c != '*')
        .filter_map(|w| {
            let text = w.trim_end_matches('*');
            // A `*` inside a word is no wildcard: the word is its letters and digits.
            let text: String = text.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
            (!text.is_empty()).then(|| Word { prefix: w.ends_with('*'), text })
        })
        .collect()
}

/// The first place `phrase`'s words stand together in `text`'s words, as those words.
fn holds(text: &[String], phrase: &[Word]) -> Option<String> {
    let fits = |t: &String, w: &Word| if w.prefix { t.starts_with(&w.text) } else { *t == w.text };
    if phrase.is_empty() {
        return None;
    }
    text.windows(phrase.len()).find(|ts| ts.iter().zip(phrase).all(|(t, w)| fits(t, w))).map(|ts| ts.join(" "))
}

/// Checks the task (its goal, then its context) against every value, in the order written.
pub fn check(values: &[AgentValue], goal: &str, context: &str) -> Check {
    let parts = [("goal", words(goal)), ("context", words(context))];
    let conflict = values.iter().find_map(|v| {
        v.refuse_if.iter().find_map(|p| {
            let phrase = pattern(p);
            parts.iter().find_map(|(found_in, text)| Some((*found_in, holds(text, &phrase)?))).map(
                |(found_in, matched)| Conflict {
                    value: v.name.clone(),
                    phrase: p.clone(),
                    matched,
                    found_in,
                    description: v.description.clone(),
                    judged: None,
                },
            )
        })
    });
    Check { checked: values.iter().map(|v| v.name.clone()).collect(), conflict, judged: None }
}

/// The values part of accepting a task where a run is created: the check, or the error that
/// declines the task (exit 9). Every new run passes here, however it was started (`init`,
/// `run`, event mode, the API, a worker), so no way in skips the agent's values.
pub fn accept(values: &[AgentValue], goal: &str, context: &str) -> agentloop_types::error::Result<Check> {
    let c = check(values, goal, context);
    match &c.conflict {
        Some(k) => Err(declined(k, None)),
        None => Ok(c),
    }
}

/// A task declined for a conflict with the agent's values (exit 9, as negotiation), with the
/// negotiation when one was made. `--force` does not override it: the values are the user's
/// own rule, changed where they are written, not per run.
pub fn declined(c: &Conflict, negotiation: Option<serde_json::Value>) -> agentloop_types::error::Error {
    let n = negotiation.map(|n| format!("; negotiation: {n}")).unwrap_or_default();
    agentloop_types::error::Error::new(
        agentloop_types::error::Kind::Negotiation,
        format!("task declined before it started: {}{n}", c.reason()),
    )
    .with_hint(format!(
        "change the task, or the value `{}` under `values:` (`agentloop config show` names the file that sets it); --force does not override a value",
        c.value
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, refuse_if: &[&str]) -> AgentValue {
        AgentValue {
            name: name.into(),
            description: None,
            refuse_if: refuse_if.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_phrase_matches_as_whole_words_case_and_punctuation_aside() {
        let v = [value("honesty", &["fake review"]), value("privacy", &["home address"])];
        let c = check(&v, "Write a FAKE   review!", "").conflict.unwrap();
        assert_eq!((c.value.as_str(), c.found_in), ("honesty", "goal"));
        assert!(check(&v, "hire fake reviewers", "").conflict.is_none(), "a word must be whole");
        let star = [value("honesty", &["fake review*"])];
        assert!(check(&star, "hire fake reviewers", "").conflict.is_some(), "unless it ends in *");
        assert!(check(&star, "a fake", "").conflict.is_none());
        let c = check(&v, "find the owner", "look up their home-address").conflict.unwrap();
        assert_eq!((c.value.as_str(), c.found_in, c.phrase.as_str()), ("privacy", "context", "home address"));
        assert_eq!(check(&v, "summarise notes", "").checked, ["honesty", "privacy"]);
    }
}
