#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_template::{BUILTIN, PromptVars, Template};

#[test]
fn every_built_in_template_rendered() {
    for (name, _) in BUILTIN {
        let template = Template::builtin(name).unwrap();
        let fresh = PromptVars {
            context_window: 200_000,
            date: "2026-11-21".into(),
            ..PromptVars::default()
        };
        insta::assert_snapshot!(format!("{name}"), template.render_prompt(&fresh).unwrap());
        let update = PromptVars {
            custom_instructions: Some("Keep commit hashes.".into()),
            previous_summary: Some("## Goal\nPort the parser to Rust.".into()),
            ..fresh
        };
        insta::assert_snapshot!(
            format!("{name}-update"),
            template.render_prompt(&update).unwrap()
        );
    }
}

#[test]
fn a_user_template_uses_the_variables() {
    let template = Template::from_source(
        "team",
        "Our window is {{ context_window }} tokens, today is {{ date }}.\n\n## What we did\n## What is next\n",
    )
    .unwrap();
    let prompt = template
        .render_prompt(&PromptVars {
            context_window: 32_000,
            date: "2026-11-21".into(),
            ..PromptVars::default()
        })
        .unwrap();
    assert!(prompt.contains("Our window is 32000 tokens, today is 2026-11-21."));
    assert_eq!(template.sections(), ["What we did", "What is next"]);
}
