//! Text cut to a length a reader (a person, a model's prompt, an error) can take.

/// Cuts `s` to at most `max` characters, the last of them `…` when anything was cut.
pub fn cap_chars(s: &mut String, max: usize) {
    if s.chars().count() > max {
        let keep: String = s.chars().take(max.saturating_sub(1)).collect();
        *s = format!("{keep}…");
    }
}
