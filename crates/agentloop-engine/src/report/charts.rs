//! The report's inline SVG charts: the timeline of phases (one bar per phase entry, in four
//! lanes, widths from the recorded durations) and tokens and cost per step.

use super::html::{duration, esc, thousands, usd};
use super::{Run, Step};
use agentloop_types::trace::{Entry, Phase};
use std::fmt::Write;

const WIDTH: f64 = 960.0;
const LABEL: f64 = 70.0;
const TRACK: f64 = WIDTH - LABEL - 10.0;
const LANES: [Phase; 4] = [Phase::Frame, Phase::Plan, Phase::Act, Phase::Reflect];

/// One line of a bar's tooltip.
fn describe(e: &Entry) -> String {
    let mut s = format!("step {} · {}", e.step, e.event);
    if let Some(t) = &e.tool {
        let _ = write!(s, " · {t}");
    }
    if let Some(d) = e.verdict() {
        let _ = write!(s, " → {d}");
    }
    let _ = write!(s, " · {}", duration(e.duration_ms.unwrap_or(0)));
    if let Some(u) = &e.usage {
        let _ = write!(s, " · {} tokens", thousands(u.total()));
    }
    if let Some(err) = &e.error {
        let _ = write!(s, " · error: {}", super::html::excerpt(err, 160));
    }
    s
}

/// The timeline: phases run one after another, so each bar starts where the previous ended and
/// its width follows its duration. A floor (2% of the run) keeps instant phases visible; with
/// no durations recorded (a fixed clock) every bar gets the same width.
pub fn timeline(run: &Run) -> String {
    let bars = run.phase_entries();
    if bars.is_empty() {
        return "<p class=\"empty\">No phase has finished yet.</p>".into();
    }
    let total: u64 = bars.iter().map(|e| e.duration_ms.unwrap_or(0)).sum();
    let floor = if total == 0 { 1.0 } else { total as f64 * 0.02 };
    let weights: Vec<f64> = bars.iter().map(|e| e.duration_ms.unwrap_or(0) as f64 + floor).collect();
    let sum: f64 = weights.iter().sum();
    let lane_h = 26.0;
    let height = lane_h * LANES.len() as f64 + 24.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"Timeline of {} phase entries\">",
        bars.len()
    );
    for (i, p) in LANES.iter().enumerate() {
        let y = i as f64 * lane_h;
        let _ = write!(
            s,
            "<rect class=\"lane\" x=\"{LABEL}\" y=\"{y}\" width=\"{TRACK}\" height=\"{lane_h}\"/><text class=\"lane-label\" x=\"0\" y=\"{:.1}\">{}</text>",
            y + lane_h * 0.65,
            p.as_str()
        );
    }
    let mut x = LABEL;
    for (e, w) in bars.iter().zip(&weights) {
        let width = (w / sum * TRACK).max(1.0);
        let phase = e.phase.unwrap_or(Phase::Run);
        let lane = LANES.iter().position(|p| *p == phase).unwrap_or(0);
        let y = lane as f64 * lane_h + 4.0;
        let err = if e.is_error() { " err" } else { "" };
        let ms = e.duration_ms.unwrap_or(0);
        let _ = write!(
            s,
            "<a href=\"#step-{step}\"><rect class=\"bar p-{p}{err}\" data-phase=\"{p}\" data-step=\"{step}\" data-ms=\"{ms}\" x=\"{x:.2}\" y=\"{y}\" width=\"{width:.2}\" height=\"{h}\" rx=\"3\"><title>{t}</title></rect>",
            step = e.step,
            p = phase.as_str(),
            h = lane_h - 8.0,
            t = esc(&describe(e)),
        );
        if width > 52.0 {
            let _ = write!(
                s,
                "<text class=\"bar-label\" x=\"{:.2}\" y=\"{:.1}\">{}</text>",
                x + 4.0,
                y + lane_h * 0.5,
                esc(&duration(ms))
            );
        }
        s.push_str("</a>");
        x += width;
    }
    let axis_y = lane_h * LANES.len() as f64 + 16.0;
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"{LABEL}\" y=\"{axis_y}\">0</text><text class=\"axis end\" x=\"{}\" y=\"{axis_y}\">{}</text></svg>",
        LABEL + TRACK,
        if total == 0 { "no durations recorded".to_string() } else { esc(&duration(total)) }
    );
    s
}

/// Tokens per step as stacked bars (input, output), with each step's cost above its bar (none
/// for a scripted run, which spends nothing).
pub fn usage(steps: &[Step], scripted: bool) -> String {
    let steps: Vec<&Step> = steps.iter().filter(|s| s.usage.total() > 0 || s.cost_usd > 0.0).collect();
    if steps.is_empty() {
        return "<p class=\"empty\">No model call has been recorded.</p>".into();
    }
    let max = steps.iter().map(|s| s.usage.total()).max().unwrap_or(1).max(1) as f64;
    let (top, chart_h) = (18.0, 150.0);
    let height = top + chart_h + 22.0;
    let slot = TRACK / steps.len() as f64;
    let bar_w = (slot * 0.6).min(48.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"usage\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"Tokens and cost per step\">"
    );
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"0\" y=\"{:.1}\">{}</text><text class=\"axis\" x=\"0\" y=\"{:.1}\">0</text>",
        top + 10.0,
        thousands(max as u64),
        top + chart_h
    );
    for (i, st) in steps.iter().enumerate() {
        let x = LABEL + slot * i as f64 + (slot - bar_w) / 2.0;
        let input = (st.usage.input_tokens + st.usage.cache_read_tokens + st.usage.cache_write_tokens) as f64;
        let output = st.usage.output_tokens as f64;
        let h_in = input / max * chart_h;
        let h_out = output / max * chart_h;
        let y_in = top + chart_h - h_in;
        let y_out = y_in - h_out;
        let label = if st.n == 0 { "frame".to_string() } else { format!("step {}", st.n) };
        let tip = format!(
            "{label}: {} tokens in, {} out, {}",
            thousands(input as u64),
            thousands(output as u64),
            if scripted { "no cost (scripted)".into() } else { usd(st.cost_usd) }
        );
        let _ = write!(
            s,
            "<g class=\"step-usage\" data-step=\"{n}\" data-usd=\"{c}\"><title>{tip}</title><rect class=\"tok-in\" x=\"{x:.2}\" y=\"{y_in:.2}\" width=\"{bar_w:.2}\" height=\"{h_in:.2}\"/><rect class=\"tok-out\" x=\"{x:.2}\" y=\"{y_out:.2}\" width=\"{bar_w:.2}\" height=\"{h_out:.2}\"/><text class=\"cost\" x=\"{cx:.2}\" y=\"{cy:.2}\">{cost}</text><text class=\"axis mid\" x=\"{cx:.2}\" y=\"{ly:.1}\">{label}</text></g>",
            n = st.n,
            c = st.cost_usd,
            tip = esc(&tip),
            cx = x + bar_w / 2.0,
            cy = (y_out - 4.0).max(10.0),
            cost = if scripted { String::new() } else { esc(&usd(st.cost_usd)) },
            ly = top + chart_h + 16.0,
        );
    }
    s.push_str("</svg>");
    s
}
