use minijinja::{Environment, context};

/// The built-in templates, by name.
pub const BUILTIN: [(&str, &str); 3] = [
    ("structured", include_str!("../templates/structured.md")),
    ("anchored", include_str!("../templates/anchored.md")),
    ("detailed", include_str!("../templates/detailed.md")),
];
const PREAMBLE: &str = include_str!("../templates/preamble.md");
const TRAILER: &str = include_str!("../templates/trailer.md");

/// The variables a template may use.
pub const VARIABLES: [&str; 4] = [
    "custom_instructions",
    "previous_summary",
    "context_window",
    "date",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Why a template cannot be used, or a summary does not fit it.
#[non_exhaustive]
pub enum TemplateError {
    #[error("unknown template `{name}` (built in: {known})")]
    /// No built-in template has this name.
    UnknownBuiltin {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
    #[error("template `{template}` uses the unknown variable `{variable}`{hint} (known: {known})")]
    /// The template uses a variable that is not offered.
    UnknownVariable {
        /// The template.
        template: String,
        /// The variable.
        variable: String,
        /// " (did you mean …?)", or empty.
        hint: String,
        /// The variables offered.
        known: String,
    },
    #[error("template `{template}`: {message}")]
    /// The template is not valid minijinja.
    Syntax {
        /// The template.
        template: String,
        /// The parser's message.
        message: String,
    },
    #[error("template `{template}` has no section headings (lines starting with `## `)")]
    /// The template has no `## ` section.
    NoSections {
        /// The template.
        template: String,
    },
    #[error("the summary is empty")]
    /// The summary is empty.
    EmptySummary,
}

/// What a prompt is rendered with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptVars {
    /// The team's own instructions for summaries, appended to the prompt.
    pub custom_instructions: Option<String>,
    /// The summary the head starts with, when there is one: the model is asked to update it.
    pub previous_summary: Option<String>,
    /// The working model's context window, in tokens.
    pub context_window: usize,
    /// Today, as `YYYY-MM-DD` (passed in so that tests and snapshots are stable).
    pub date: String,
}

/// A compaction template: its name, its source and the section headings it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    name: String,
    source: String,
    sections: Vec<String>,
}

impl Template {
    /// A built-in template by name.
    pub fn builtin(name: &str) -> Result<Template, TemplateError> {
        match BUILTIN.iter().find(|(builtin, _)| *builtin == name) {
            Some((name, source)) => Template::from_source(name, source),
            None => Err(TemplateError::UnknownBuiltin {
                name: name.to_owned(),
                known: BUILTIN.map(|(name, _)| name).join(", "),
            }),
        }
    }

    /// A template from its text (a user's `template_file`, a plugin's template). Refused when it
    /// does not parse, uses a variable that does not exist, or names no section.
    pub fn from_source(name: &str, source: &str) -> Result<Template, TemplateError> {
        let env = environment();
        let parsed = env
            .template_from_str(source)
            .map_err(|error| TemplateError::Syntax {
                template: name.to_owned(),
                message: error.to_string(),
            })?;
        let mut used: Vec<String> = parsed.undeclared_variables(false).into_iter().collect();
        used.sort();
        if let Some(unknown) = used.iter().find(|used| !VARIABLES.contains(&used.as_str())) {
            let hint = condense_text::nearest(unknown, &VARIABLES)
                .map(|near| format!(" (did you mean `{near}`?)"))
                .unwrap_or_default();
            return Err(TemplateError::UnknownVariable {
                template: name.to_owned(),
                variable: unknown.clone(),
                hint,
                known: VARIABLES.join(", "),
            });
        }
        let sections = headings(source);
        if sections.is_empty() {
            return Err(TemplateError::NoSections {
                template: name.to_owned(),
            });
        }
        Ok(Template {
            name: name.to_owned(),
            source: source.to_owned(),
            sections,
        })
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The template's text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The headings the summary must have, in order.
    pub fn sections(&self) -> &[String] {
        &self.sections
    }

    /// The whole prompt: preamble, the template, trailer.
    pub fn render_prompt(&self, vars: &PromptVars) -> Result<String, TemplateError> {
        let env = environment();
        let ctx = context! {
            custom_instructions => vars.custom_instructions.as_deref().map(str::trim).filter(|s| !s.is_empty()),
            previous_summary => vars.previous_summary.as_deref().map(str::trim).filter(|s| !s.is_empty()),
            context_window => vars.context_window,
            date => vars.date.as_str(),
        };
        let render = |name: &str, source: &str| {
            env.render_str(source, &ctx)
                .map_err(|error| TemplateError::Syntax {
                    template: name.to_owned(),
                    message: error.to_string(),
                })
        };
        let preamble = render("preamble", PREAMBLE)?;
        let body = render(&self.name, &self.source)?;
        let trailer = render("trailer", TRAILER)?;
        Ok(format!(
            "{}\n\n{}\n{}\n",
            preamble.trim_end(),
            body.trim(),
            trailer.trim_end()
        ))
    }
}

/// Block tags take their line with them, so `{% if %}` lines leave no blank lines behind.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build();
    // The default delimiters always build; keep the default syntax if that ever changes.
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env
}

/// The `## ` and `### ` lines of a template, without the hashes.
fn headings(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| {
            line.strip_prefix("### ")
                .or_else(|| line.strip_prefix("## "))
        })
        .map(|heading| heading.trim().to_owned())
        .filter(|heading| !heading.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_templates_have_their_sections() {
        assert_eq!(
            Template::builtin("structured").unwrap().sections(),
            [
                "Goal",
                "Instructions",
                "Discoveries",
                "Accomplished",
                "Relevant files / directories"
            ]
        );
        assert_eq!(
            Template::builtin("anchored").unwrap().sections(),
            [
                "Goal",
                "Constraints & Preferences",
                "Progress",
                "Done",
                "In Progress",
                "Blocked",
                "Key Decisions",
                "Next Steps",
                "Critical Context",
                "Relevant Files"
            ]
        );
        assert_eq!(Template::builtin("detailed").unwrap().sections().len(), 9);
    }

    #[test]
    fn an_unknown_variable_is_named_with_a_suggestion() {
        let error = Template::from_source("team", "## Goal\n{{ custom_instruction }}").unwrap_err();
        assert_eq!(
            error.to_string(),
            "template `team` uses the unknown variable `custom_instruction` (did you mean `custom_instructions`?) (known: custom_instructions, previous_summary, context_window, date)"
        );
        let error =
            Template::from_source("team", "## Goal\n{% if repo %}x{% endif %}").unwrap_err();
        assert!(
            matches!(error, TemplateError::UnknownVariable { ref variable, .. } if variable == "repo")
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(matches!(
            Template::from_source("t", "## Goal\n{% if %}"),
            Err(TemplateError::Syntax { .. })
        ));
        assert!(matches!(
            Template::from_source("t", "no headings"),
            Err(TemplateError::NoSections { .. })
        ));
        assert_eq!(
            Template::builtin("fancy").unwrap_err().to_string(),
            "unknown template `fancy` (built in: structured, anchored, detailed)"
        );
    }
}
