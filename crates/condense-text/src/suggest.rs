//! "Did you mean …?" for names a person typed: template variables, configuration keys.

/// The known name closest to `word`, when it is close enough to be a likely typo.
pub fn nearest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (edit_distance(word, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.len() / 3).max(2))
        .min()
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(previous + 1).min(row[j] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested_and_far_ones_not() {
        let known = ["protect_tokens", "minimum_tokens", "skip_user_turns"];
        assert_eq!(nearest("protect_token", &known), Some("protect_tokens"));
        assert_eq!(nearest("minimum_tokns", &known), Some("minimum_tokens"));
        assert_eq!(nearest("colour", &known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
