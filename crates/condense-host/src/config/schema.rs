//! Every configuration key and the kind of value it takes. The built-in file
//! (`config/condense.toml`) gives each its default; a test checks that the two agree.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Float,
    Bool,
    Str,
    List,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Int => "a non-negative integer",
            Kind::Float => "a number",
            Kind::Bool => "true or false",
            Kind::Str => "a string",
            Kind::List => "a list of strings",
        }
    }
}

pub(crate) const SECTIONS: &[(&str, &[(&str, Kind)])] = &[
    (
        "model",
        &[
            ("context_window", Kind::Int),
            ("max_output_tokens", Kind::Int),
            ("encoding", Kind::Str),
        ],
    ),
    (
        "prune",
        &[
            ("protected_tools", Kind::List),
            ("skip_user_turns", Kind::Int),
            ("skip_tool_calls", Kind::Int),
            ("protect_tokens", Kind::Int),
            ("minimum_tokens", Kind::Int),
            ("adaptive_thresholds", Kind::Bool),
            ("turn_budget_chars", Kind::Int),
            ("preview_bytes", Kind::Int),
            ("duplicate_min_chars", Kind::Int),
            ("placeholder", Kind::Str),
            ("preview_note", Kind::Str),
            ("duplicate_note", Kind::Str),
        ],
    ),
    (
        "compaction",
        &[
            ("template", Kind::Str),
            ("template_file", Kind::Str),
            ("template_plugin", Kind::Str),
            ("custom_instructions", Kind::Str),
            ("continuation", Kind::Str),
            ("reserve_cap", Kind::Int),
            ("tail_ratio", Kind::Float),
            ("min_tail_tokens", Kind::Int),
            ("max_tail_tokens", Kind::Int),
            ("min_tail_turns", Kind::Int),
            ("max_failures", Kind::Int),
        ],
    ),
    (
        "summarizer",
        &[
            ("kind", Kind::Str),
            ("budget_tokens", Kind::Int),
            ("quote_chars", Kind::Int),
            ("base_url", Kind::Str),
            ("model", Kind::Str),
            ("compaction_model", Kind::Str),
            ("api_key_env", Kind::Str),
            ("timeout_secs", Kind::Int),
            ("max_attempts", Kind::Int),
            ("tool_output_chars", Kind::Int),
            ("context_window", Kind::Int),
            ("max_summary_tokens", Kind::Int),
        ],
    ),
    ("store", &[("dir", Kind::Str)]),
];

/// Keys whose values from every layer are joined rather than replaced.
pub(crate) const UNION_KEYS: [&str; 1] = ["prune.protected_tools"];

pub(crate) fn section(name: &str) -> Option<&'static [(&'static str, Kind)]> {
    SECTIONS
        .iter()
        .find(|(section, _)| *section == name)
        .map(|(_, keys)| *keys)
}

pub(crate) fn kind_of(key: &str) -> Option<Kind> {
    let (section_name, name) = key.split_once('.')?;
    section(section_name)?
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, kind)| *kind)
}
