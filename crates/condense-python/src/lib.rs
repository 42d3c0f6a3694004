//! The Python binding of condense: the extension module `condense._condense`, which the
//! package `condense` (`python/condense/`) wraps in Python classes.
//!
//! What crosses the boundary is JSON text: a request body in one of the wire formats, a
//! session state, a report. The Python side turns its dicts into that text once and back once;
//! nothing is converted field by field, and what condense writes is exactly what the CLI
//! writes for the same session (the tests compare the bytes). The GIL is released while Rust
//! works, so other Python threads (and `aprepare`'s event loop) go on.

use std::path::PathBuf;

use condense_formats::Format;
use condense_host::{Compactor as Inner, Config, SessionState, Sources};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _condense,
    CondenseError,
    PyException,
    "A condense error: bad input, a bad setting, a failed summarizer. Its message is the CLI's."
);

fn error(message: impl std::fmt::Display) -> PyErr {
    CondenseError::new_err(message.to_string())
}

/// A wire format by the name the Python API uses.
fn format_named(name: &str) -> PyResult<Format> {
    match name {
        "openai" => Ok(Format::OpenAi),
        "anthropic" => Ok(Format::Anthropic),
        "responses" | "openai-responses" => Ok(Format::Responses),
        other => Err(error(format!(
            "unknown format `{other}` (expected openai, anthropic or responses)"
        ))),
    }
}

fn runtime() -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|failure| error(format!("condense could not start its runtime: {failure}")))
}

/// The compactor, configured as the CLI is: the built-in file, the user's and the project's,
/// `config` if given, the `CONDENSE_*` variables, then `settings` (each `(name, value)` a key
/// such as `context_window` or `prune.protect_tokens`, the value as a flag would give it).
#[pyclass(module = "condense._condense", frozen)]
struct Compactor {
    inner: Inner,
    config: Config,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor").finish_non_exhaustive()
    }
}

/// What one call gave, as JSON text and words: the body written in its format (as the CLI
/// writes it), the session state, the report, and the report in words.
type Prepared = (String, String, String, String);

#[pymethods]
impl Compactor {
    #[new]
    #[pyo3(signature = (config=None, settings=Vec::new()))]
    fn new(config: Option<PathBuf>, settings: Vec<(String, String)>) -> PyResult<Self> {
        let cwd = std::env::current_dir().map_err(error)?;
        let mut sources = Sources::discover(&cwd, config).map_err(error)?;
        for (name, value) in settings {
            let at = format!("Compactor({name}=…)");
            let key = condense_host::config::key_named(&name, &at).map_err(error)?;
            sources.flags.push((at, key, value));
        }
        let config = Config::load(&sources).map_err(error)?;
        if config.summarizer_kind() == condense_host::SummarizerKind::Upstream {
            return Err(error(
                "summarizer.kind = \"upstream\" asks the request's own upstream with the client's credentials: only `condense serve` has them; use extractive, openai or anthropic",
            ));
        }
        let dir = config.store_dir();
        if dir.to_string_lossy().starts_with("redis://") {
            return Err(error(
                "store.dir: the Python binding keeps originals in a directory; a Redis store is the proxy's and the CLI's",
            ));
        }
        let (plugins, _warnings) =
            condense_host::plugins::load_all(&config.plugins).map_err(error)?;
        let inner = Inner::with_plugins(&config, &plugins)
            .map_err(error)?
            .with_store(Box::new(condense_host::DirStore::new(
                std::path::absolute(&dir).unwrap_or(dir),
            )));
        Ok(Compactor {
            inner,
            config,
            runtime: runtime()?,
        })
    }

    /// The per-request path: frozen decisions from `state` (a state's JSON, or none for a new
    /// session), pruned, and summarized only when due; `usage` is the provider's count of the
    /// request that the body's last assistant message answered, when the harness has it.
    #[pyo3(signature = (body, format, state=None, usage=None))]
    fn prepare(
        &self,
        py: Python<'_>,
        body: &str,
        format: &str,
        state: Option<&str>,
        usage: Option<usize>,
    ) -> PyResult<Prepared> {
        let format = format_named(format)?;
        let mut state = match state {
            Some(text) => SessionState::from_json(text).map_err(error)?,
            None => SessionState::default(),
        };
        py.detach(|| {
            let conversation = condense_formats::read(body.as_bytes(), Some(format))
                .map_err(|failure| error(format!("condense: {failure}")))?
                .1;
            if let Some(tokens) = usage
                && let Some(at) = conversation
                    .messages
                    .iter()
                    .rposition(|message| message.role == condense_core::Role::Assistant)
            {
                state.reported_usage = Some(condense_host::ReportedUsage {
                    message: at,
                    tokens,
                });
            }
            let original = conversation.clone();
            let compaction = self
                .runtime
                .block_on(self.inner.prepare(conversation, &mut state))
                .map_err(error)?;
            self.finish(format, body, &original, &compaction, &state)
        })
    }

    /// A one-off compaction with fresh decisions, as `condense compact` makes of a saved
    /// session (no continuation).
    fn compact(&self, py: Python<'_>, body: &str, format: &str) -> PyResult<Prepared> {
        let format = format_named(format)?;
        py.detach(|| {
            let conversation = condense_formats::read(body.as_bytes(), Some(format))
                .map_err(|failure| error(format!("condense: {failure}")))?
                .1;
            let original = conversation.clone();
            let compaction = self
                .runtime
                .block_on(self.inner.compact(conversation))
                .map_err(error)?;
            self.finish(
                format,
                body,
                &original,
                &compaction,
                &SessionState::default(),
            )
        })
    }

    /// Phase 1 alone with fresh decisions, as `condense prune` does: the agent's
    /// `trim_tool_result` calls applied (their reports in `prune.trims`), then pruning.
    fn prune(&self, py: Python<'_>, body: &str, format: &str) -> PyResult<Prepared> {
        let format = format_named(format)?;
        py.detach(|| {
            let conversation = condense_formats::read(body.as_bytes(), Some(format))
                .map_err(|failure| error(format!("condense: {failure}")))?
                .1;
            let original = conversation.clone();
            let compaction = self
                .runtime
                .block_on(self.inner.prune(conversation))
                .map_err(error)?;
            self.finish(
                format,
                body,
                &original,
                &compaction,
                &SessionState::default(),
            )
        })
    }

    /// The tokens of a body, as the trigger counts them.
    fn count(&self, py: Python<'_>, body: &str, format: &str) -> PyResult<usize> {
        let format = format_named(format)?;
        py.detach(|| {
            let conversation = condense_formats::read(body.as_bytes(), Some(format))
                .map_err(|failure| error(format!("condense: {failure}")))?
                .1;
            Ok(self.inner.counter().count_conversation(&conversation))
        })
    }

    /// The original a placeholder's handle names, from this configuration's store.
    fn recall(&self, py: Python<'_>, handle: &str) -> PyResult<Vec<u8>> {
        recall_from(py, handle, self.config.store_dir())
    }

    /// The effective configuration, as `condense config show` prints it.
    fn config_show(&self) -> String {
        self.config.show()
    }
}

impl Compactor {
    /// The answer for `compaction` of `body` (read as `original`): the body written in its
    /// format, or, when nothing changed, the body as it came (as the CLI gives back a file's
    /// own bytes).
    fn finish(
        &self,
        format: Format,
        body: &str,
        original: &condense_core::Conversation,
        compaction: &condense_host::Compaction,
        state: &SessionState,
    ) -> PyResult<Prepared> {
        let body = if compaction.conversation == *original {
            body.to_owned()
        } else {
            let written =
                condense_formats::write(format, &compaction.conversation).map_err(error)?;
            String::from_utf8(written).map_err(error)?
        };
        let report = serde_json::to_string(&compaction.report).map_err(error)?;
        let text = condense_host::render_report(
            "request",
            format.name(),
            &self.config,
            &compaction.report,
            false,
            None,
        );
        Ok((body, state.to_json(), report, text))
    }
}

fn recall_from(py: Python<'_>, handle: &str, dir: PathBuf) -> PyResult<Vec<u8>> {
    if !condense_pruner::is_handle(handle) {
        return Err(error(format!(
            "`{handle}` is not a handle: a handle is the 32 lowercase hex digits after `condense recall` in a placeholder"
        )));
    }
    py.detach(|| {
        use condense_host::Store as _;
        condense_host::DirStore::new(&dir)
            .get(handle)
            .map_err(|failure| error(format!("store {}: {failure}", dir.display())))
    })
}

/// The original a placeholder's handle names, from the store in `store` (a directory), or the
/// built-in configuration's when none is given.
#[pyfunction]
#[pyo3(signature = (handle, store=None))]
fn recall(py: Python<'_>, handle: &str, store: Option<PathBuf>) -> PyResult<Vec<u8>> {
    let dir = match store {
        Some(dir) => dir,
        None => Config::built_in().map_err(error)?.store_dir(),
    };
    recall_from(py, handle, dir)
}

/// The `trim_tool_result` tool as `format`'s tool list wants it, as JSON.
#[pyfunction]
fn tools_schema(format: &str) -> PyResult<String> {
    let format = format_named(format)?;
    let tool = condense_formats::tool_definition(
        format,
        condense_pruner::TRIM_TOOL,
        condense_pruner::TRIM_TOOL_DESCRIPTION,
        condense_pruner::trim_tool_parameters(),
    );
    serde_json::to_string(&tool).map_err(error)
}

/// The `condense._condense` module.
#[pymodule]
fn _condense(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Compactor>()?;
    module.add_function(wrap_pyfunction!(recall, module)?)?;
    module.add_function(wrap_pyfunction!(tools_schema, module)?)?;
    module.add("CondenseError", module.py().get_type::<CondenseError>())?;
    Ok(())
}
