//! What a suite's trials add up to: the per case and model rows ([`EvalCase`]), the table
//! people read, JUnit XML for CI, and the comparison with an earlier `--json` (`--baseline`).

use agentloop_engine::schema::eval::{EvalCase, EvalModel, EvalReport, EvalTrial};
use agentloop_io::output::Printer;
use agentloop_types::error::{Error, Result};
use camino::Utf8Path;

/// The middle value (the mean of the two middle ones for an even count); None for none.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// One case with one model, from its trials.
pub fn row(case: &str, model: &str, pass_rate: f64, results: Vec<EvalTrial>) -> EvalCase {
    let trials = results.len() as u32;
    let passed = results.iter().filter(|t| t.passed).count() as u32;
    let rate = if trials == 0 { 0.0 } else { f64::from(passed) / f64::from(trials) };
    let pick = |f: &dyn Fn(&EvalTrial) -> Option<f64>| median(results.iter().filter_map(f).collect());
    EvalCase {
        case: case.into(),
        model: model.into(),
        pass_rate,
        passed,
        trials,
        rate,
        ok: rate + 1e-9 >= pass_rate,
        median_steps: pick(&|t| t.steps.map(|s| s as f64)),
        median_tokens: pick(&|t| t.tokens.map(|s| s as f64)),
        median_cost_usd: pick(&|t| t.cost_usd),
        median_seconds: pick(&|t| Some(t.seconds)).unwrap_or(0.0),
        commonest_failure: commonest(&results),
        results,
    }
}

/// The failure most trials had (the first seen among equals).
fn commonest(results: &[EvalTrial]) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for f in results.iter().filter_map(|t| t.failure.as_deref()) {
        match counts.iter_mut().find(|(l, _)| *l == f) {
            Some((_, n)) => *n += 1,
            None => counts.push((f, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts.iter().find(|(_, n)| *n == best).map(|(l, _)| l.to_string())
}

/// Each model over the suite, from the rows, in the order the models first appear.
pub fn per_model(rows: &[EvalCase]) -> Vec<EvalModel> {
    let mut out: Vec<EvalModel> = Vec::new();
    for c in rows {
        let at = match out.iter().position(|m| m.model == c.model) {
            Some(i) => i,
            None => {
                out.push(EvalModel { model: c.model.clone(), cases_ok: 0, cases: 0, trials_passed: 0, trials: 0 });
                out.len() - 1
            }
        };
        let m = &mut out[at];
        m.cases += 1;
        m.cases_ok += u32::from(c.ok);
        m.trials_passed += c.passed;
        m.trials += c.trials;
    }
    out
}

fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if digits == 0 => format!("{}", x.round() as i64),
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// The table on stdout: one line per case and model.
pub fn table(p: &Printer, r: &EvalReport) {
    let wide = |f: &dyn Fn(&EvalCase) -> usize, min: usize| r.cases.iter().map(f).max().unwrap_or(0).max(min);
    let (cw, mw) = (wide(&|c| c.case.chars().count(), 4), wide(&|c| c.model.chars().count(), 5));
    let head = format!(
        "{:<4}  {:<cw$}  {:<mw$}  {:>5}  {:>5}  {:>7}  {:>8}  {:>6}  commonest failure",
        "", "case", "model", "pass", "steps", "tokens", "cost", "secs"
    );
    p.outln(head.trim_end());
    for c in &r.cases {
        let (mark, colour) = if c.ok { ("ok", "32") } else { ("FAIL", "31") };
        let rest = format!(
            "  {:<cw$}  {:<mw$}  {:>5}  {:>5}  {:>7}  {:>8}  {:>6}  {}",
            c.case,
            c.model,
            format!("{}/{}", c.passed, c.trials),
            num(c.median_steps, 0),
            num(c.median_tokens, 0),
            c.median_cost_usd.map_or("-".into(), |x| format!("${x:.4}")),
            format!("{:.1}", c.median_seconds),
            c.commonest_failure.as_deref().unwrap_or("")
        );
        p.outln_painted(&[(&format!("{mark:<4}"), colour), (rest.trim_end(), "")]);
    }
    if r.models.len() > 1 {
        p.outln("");
        for m in &r.models {
            p.outln(&format!(
                "{:<mw$}  {}/{} cases ok, {}/{} trials passed",
                m.model, m.cases_ok, m.cases, m.trials_passed, m.trials
            ));
        }
    }
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one testcase per case and model, failed when it fell short of its pass rate,
/// the message naming the commonest failure, the text listing each failed trial.
pub fn junit(r: &EvalReport) -> String {
    let failures = r.cases.iter().filter(|c| !c.ok).count();
    let time: f64 = r.cases.iter().flat_map(|c| c.results.iter().map(|t| t.seconds)).sum();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str(&format!(
        "<testsuites name=\"agentloop eval\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">\n",
        r.cases.len()
    ));
    s.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">\n",
        xml(&r.suite),
        r.cases.len()
    ));
    for c in &r.cases {
        let t: f64 = c.results.iter().map(|t| t.seconds).sum();
        let head = format!(
            "    <testcase classname=\"{}.{}\" name=\"{}\" time=\"{t:.3}\"",
            xml(&r.suite),
            xml(&c.model),
            xml(&c.case)
        );
        if c.ok {
            s.push_str(&format!("{head}/>\n"));
            continue;
        }
        let why = c.commonest_failure.as_deref().unwrap_or("failed");
        let message = format!("{}/{} trials passed, below pass_rate {}: {why}", c.passed, c.trials, c.pass_rate);
        let mut body = String::new();
        for tr in c.results.iter().filter(|t| !t.passed) {
            body.push_str(&format!("trial {} ({}):\n", tr.trial, tr.workspace));
            for f in &tr.failures {
                body.push_str(&format!("  {f}\n"));
            }
        }
        s.push_str(&format!(
            "{head}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
            xml(&message),
            xml(why),
            xml(&body)
        ));
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// An earlier `eval --json`: each case and model's pass rate.
pub struct Baseline {
    pub path: String,
    rates: Vec<(String, String, f64)>,
}

/// Reads `--baseline FILE`, refusing what is no `eval --json` document (before any trial runs).
pub fn read_baseline(path: &Utf8Path) -> Result<Baseline> {
    let text = agentloop_io::fs::read_to_string(path)?;
    let bad = |why: String| Error::usage(format!("--baseline {path}: not an `eval --json` document: {why}"));
    let then: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let rows = then["cases"].as_array().ok_or_else(|| bad("no `cases`".into()))?;
    let mut rates = Vec::new();
    for r in rows {
        match (r["case"].as_str(), r["model"].as_str(), r["rate"].as_f64()) {
            (Some(c), Some(m), Some(rate)) => rates.push((c.to_string(), m.to_string(), rate)),
            _ => return Err(bad("a case without its `case`, `model` and `rate`".into())),
        }
    }
    Ok(Baseline { path: path.to_string(), rates })
}

/// The cases whose pass rate fell below the baseline's, named with both rates; a case or model
/// the baseline lacks is no regression.
pub fn regressions(now: &EvalReport, baseline: &Baseline) -> Vec<String> {
    let mut out = Vec::new();
    for c in &now.cases {
        let before = baseline.rates.iter().find(|(case, model, _)| *case == c.case && *model == c.model);
        if let Some((_, _, rate)) = before {
            if c.rate + 1e-9 < *rate {
                out.push(format!("{} ({}): pass rate {:.2} → {:.2}", c.case, c.model, rate, c.rate));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn xml_is_escaped() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\u{fffd}");
    }
}
